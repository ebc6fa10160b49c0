// Command prebuild builds every interop source folder (a pom.xml, a
// package-lock.json or a requirements.txt under interop/) into the
// interop cache before the tests run, so that a new machine's downloads
// are not charged to a test's timeout. A folder that cannot be built here
// (no toolchain, no registry) is reported and left to its tests, which
// skip; a build that fails on its own fails the command.
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/muster-registry/muster/interop/interoptest"
)

func main() {
	root, err := interoptest.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "prebuild:", err)
		os.Exit(2)
	}
	var sources []string
	_ = filepath.WalkDir(filepath.Join(root, "interop"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		switch d.Name() {
		case "target", "node_modules", "venv", "testdata":
			return filepath.SkipDir
		}
		if _, ok := interoptest.KindOf(p); ok {
			sources = append(sources, p)
			return filepath.SkipDir
		}
		return nil
	})
	failed := 0
	for _, src := range sources {
		rel, _ := filepath.Rel(root, src)
		start := time.Now()
		dir, err := interoptest.Build(src, nil)
		var u *interoptest.Unavailable
		switch {
		case errors.As(err, &u):
			fmt.Printf("== interop %s: SKIPPED, %s\n", rel, u.Reason)
		case err != nil:
			failed++
			fmt.Printf("== interop %s: FAILED\n%v\n", rel, err)
		default:
			fmt.Printf("== interop %s: built in %s (%s)\n", rel, time.Since(start).Round(time.Second), dir)
		}
	}
	if failed > 0 {
		os.Exit(1)
	}
}
