// Command realpod-images builds the archives of the real-pod images (e2e/realpods: the pause
// image, the flux view, the application image) into the image cache, each only when what it is
// made of changed, and prints for each whether it was built, how long that took and its size;
// the cache directory on its last line. Run it from the repository's root (make real-pod-images),
// as root: the application image is a debootstrap.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/fluxfed/fluxfed/e2e/realpods"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "real-pod-images: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	only := flag.String("only", "", "build only these images, comma-separated references (default: all of "+strings.Join(realpods.Images(), ", ")+")")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if _, err := os.Stat("e2e/fluxcore/build.sh"); err != nil {
		return fmt.Errorf("run from the root of the fluxfed repository (make real-pod-images): %w", err)
	}
	dir, err := realpods.CacheDir()
	if err != nil {
		return err
	}
	refs := realpods.Images()
	if *only != "" {
		refs = strings.Split(*only, ",")
	}
	b := &realpods.Builder{Dir: dir, Repo: ".", Log: os.Stderr}
	for _, ref := range refs {
		res, err := b.Build(ctx, ref)
		if err != nil {
			return err
		}
		what := "cached"
		if res.Built {
			what = "built"
		}
		fmt.Fprintf(os.Stderr, "real-pod-images: %-32s %-6s %7s %6.1f MB  %s\n", res.Ref, what, res.Took.Round(100*time.Millisecond), float64(res.Size)/(1<<20), res.Archive)
	}
	fmt.Println(dir)
	return nil
}
