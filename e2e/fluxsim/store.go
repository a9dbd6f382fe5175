package fluxsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// EnvDir names the environment variable that gives the stand-in flux its instance's directory.
const EnvDir = "FLUXFED_FLUXSIM"

const (
	stateFile = "instance.json"
	lockFile  = "instance.lock"
)

// Now is the current time as Flux gives it: seconds since the epoch.
func Now() float64 { return float64(time.Now().UnixNano()) / 1e9 }

// Create writes in as the instance of dir, which it creates; an instance already there is
// replaced.
func Create(dir string, in *Instance) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return Update(dir, func(old *Instance) error {
		*old = *in
		return nil
	})
}

// Update runs change on the instance of dir, advanced to now, and writes it back, holding the
// instance's lock throughout so that concurrent commands see one another's changes in order.
// Nothing is written when change fails.
func Update(dir string, change func(*Instance) error) error {
	unlock, err := lock(dir)
	if err != nil {
		return err
	}
	defer unlock()
	in, err := read(dir)
	if err != nil {
		return err
	}
	in.Advance(Now())
	if err := change(in); err != nil {
		return err
	}
	return write(dir, in)
}

// Read returns the instance of dir, advanced to now.
func Read(dir string) (*Instance, error) {
	var out *Instance
	err := Update(dir, func(in *Instance) error {
		out = in
		return nil
	})
	return out, err
}

// SetOnline records which ranks of the instance of dir joined rank 0 (see Instance.SetOnline).
func SetOnline(dir string, ranks []int) error {
	return Update(dir, func(in *Instance) error { return in.SetOnline(ranks, Now()) })
}

func lock(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("the stand-in flux instance in %s: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return nil, errors.Join(fmt.Errorf("locking the instance in %s: %w", dir, err), f.Close())
	}
	return func() { _ = f.Close() }, nil // closing releases the lock
}

// read returns the stored instance, or an empty one before Create.
func read(dir string) (*Instance, error) {
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return &Instance{}, nil
	}
	if err != nil {
		return nil, err
	}
	in := &Instance{}
	if err := json.Unmarshal(data, in); err != nil {
		return nil, fmt.Errorf("the stand-in flux instance in %s: %w", dir, err)
	}
	return in, nil
}

func write(dir string, in *Instance) error {
	data, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, stateFile+".*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		return errors.Join(err, tmp.Close(), os.Remove(tmp.Name()))
	}
	if err := tmp.Close(); err != nil {
		return errors.Join(err, os.Remove(tmp.Name()))
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, stateFile))
}
