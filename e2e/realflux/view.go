package realflux

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
)

// makeView writes into dir a flux view of the flux-core installation at prefix, laid out as the
// flux view images are: every directory of the installation made anew, every file a symbolic
// link to the installation's. The pods' init container copies the view it finds at /opt/view
// with cp -a, which copies the links, so that each pod gets its own directories (the provisioner
// writes broker.toml and the brokers their state there) for the price of a few thousand links.
// The installation itself stays at its own path, which its programs find their modules by.
func makeView(prefix, dir string) error {
	return filepath.WalkDir(prefix, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(prefix, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dir, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		default:
			return os.Symlink(path, target)
		}
	})
}

// loopbackOf returns the loopback address that stands for the pod address ip on this machine:
// 10.a.b.c, as the local clusters number pods (e2e/clusters), is 127.(200+a).b.c. Every broker
// binds its own, through the eth0 shim, so that brokers of every cluster can share one port.
func loopbackOf(ip string) (string, error) {
	parsed := net.ParseIP(ip).To4()
	if parsed == nil || parsed[0] != 10 || parsed[1] > 55 {
		return "", fmt.Errorf("pod address %q is not one the local clusters give (10.a.b.c, a at most 55)", ip)
	}
	return fmt.Sprintf("127.%d.%d.%d", 200+int(parsed[1]), parsed[2], parsed[3]), nil
}
