package realpods

import (
	"archive/tar"
	"cmp"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// epoch is the time of every file in a layer, so that a layer is a function of its files' names,
// modes, owners and contents.
var epoch = time.Unix(0, 0).UTC()

// tree is a directory of this machine put into a layer under another path.
type tree struct {
	// Src is the directory on this machine.
	Src string
	// Dst is where its contents go in the image, relative to the root ("" is the root, "opt/view").
	Dst string
	// RootOwned gives every file uid and gid 0 whoever owns it here (a build made by a user).
	RootOwned bool
}

// entry is one file of a layer that is not on this machine: a directory or a symbolic link.
type entry struct {
	Name string // relative to the root
	Link string // the link's target; empty for a directory
	Mode int64  // a directory's mode; 0755 when 0
}

// layerWriter writes one layer as a gzipped tar.
type layerWriter struct {
	tw    *tar.Writer
	seen  map[string]bool
	links map[[2]uint64]string // (device, inode) of files with more than one link -> first name
}

// writeLayer writes to w the gzipped tar of a layer holding the trees, then entries, in that
// order. Parent directories are added where missing. Device files, sockets and pipes are left out
// (containerd gives every container its own /dev), as is anything under a tree's dev/, proc/ and
// sys/.
func writeLayer(w io.Writer, entries []entry, trees []tree) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return err
	}
	lw := &layerWriter{tw: tar.NewWriter(zw), seen: map[string]bool{}, links: map[[2]uint64]string{}}
	for _, t := range trees {
		if err := lw.tree(t); err != nil {
			return fmt.Errorf("adding %s to the layer as /%s: %w", t.Src, t.Dst, err)
		}
	}
	for _, e := range entries {
		if err := lw.synthetic(e); err != nil {
			return err
		}
	}
	if err := lw.tw.Close(); err != nil {
		return fmt.Errorf("closing the layer's tar: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compressing the layer: %w", err)
	}
	return nil
}

func (lw *layerWriter) parents(name string) error {
	dir := path.Dir(name)
	if dir == "." || lw.seen[dir+"/"] {
		return nil
	}
	if err := lw.parents(dir); err != nil {
		return err
	}
	return lw.write(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755}, nil)
}

func (lw *layerWriter) synthetic(e entry) error {
	if err := lw.parents(e.Name); err != nil {
		return err
	}
	if e.Link == "" {
		return lw.write(&tar.Header{Typeflag: tar.TypeDir, Name: e.Name + "/", Mode: cmp.Or(e.Mode, 0o755)}, nil)
	}
	return lw.write(&tar.Header{Typeflag: tar.TypeSymlink, Name: e.Name, Linkname: e.Link, Mode: 0o777}, nil)
}

func (lw *layerWriter) write(hdr *tar.Header, body io.Reader) error {
	if lw.seen[hdr.Name] {
		return fmt.Errorf("%s is in the layer twice", hdr.Name)
	}
	lw.seen[hdr.Name] = true
	hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = epoch, time.Time{}, time.Time{}
	hdr.Format = tar.FormatPAX
	if err := lw.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("writing the tar header of %s: %w", hdr.Name, err)
	}
	if body != nil {
		if _, err := io.Copy(lw.tw, body); err != nil {
			return fmt.Errorf("writing %s into the layer: %w", hdr.Name, err)
		}
	}
	return nil
}

func (lw *layerWriter) tree(t tree) error {
	dst := strings.Trim(t.Dst, "/")
	if dst != "" {
		if err := lw.parents(dst + "/x"); err != nil {
			return err
		}
	}
	return filepath.WalkDir(t.Src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(t.Src, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if d.IsDir() && dst == "" && (rel == "dev" || rel == "proc" || rel == "sys") {
			// The mount points stay; what debootstrap left in them does not.
			return lw.dir(path.Join(dst, rel), p, t, fs.SkipDir)
		}
		name := path.Join(dst, rel)
		switch {
		case d.IsDir():
			return lw.dir(name, p, t, nil)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			return lw.write(lw.header(tar.TypeSymlink, name, info, t, target), nil)
		case d.Type().IsRegular():
			return lw.file(name, p, t)
		default:
			return nil
		}
	})
}

func (lw *layerWriter) dir(name, p string, t tree, ret error) error {
	info, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if err := lw.write(lw.header(tar.TypeDir, name+"/", info, t, ""), nil); err != nil {
		return err
	}
	return ret
}

func (lw *layerWriter) file(name, p string, t tree) error {
	info, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		key := [2]uint64{uint64(st.Dev), st.Ino} //nolint:unconvert // Dev is not uint64 on every platform
		if first, ok := lw.links[key]; ok {
			return lw.write(lw.header(tar.TypeLink, name, info, t, first), nil)
		}
		lw.links[key] = name
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	hdr := lw.header(tar.TypeReg, name, info, t, "")
	hdr.Size = info.Size()
	return lw.write(hdr, f)
}

// header is the tar header of a file of a tree: its mode, and its owner unless the tree is
// RootOwned.
func (lw *layerWriter) header(typ byte, name string, info fs.FileInfo, t tree, link string) *tar.Header {
	hdr := &tar.Header{Typeflag: typ, Name: name, Linkname: link, Mode: int64(info.Mode().Perm())}
	m := info.Mode()
	if m&fs.ModeSetuid != 0 {
		hdr.Mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		hdr.Mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		hdr.Mode |= 0o1000
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && !t.RootOwned {
		hdr.Uid, hdr.Gid = int(st.Uid), int(st.Gid)
	}
	return hdr
}
