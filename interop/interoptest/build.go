package interoptest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// Kind is a package manager that builds one kind of source folder.
type Kind string

const (
	Maven  Kind = "maven"  // a folder with pom.xml: `mvn package`
	Npm    Kind = "npm"    // a folder with package.json and package-lock.json: `npm ci`
	Python Kind = "python" // a folder with requirements.txt: a venv with `pip install -r`
)

// Unavailable says a build could not run on this machine: a toolchain is
// missing or a package registry cannot be reached. Tests skip on it.
type Unavailable struct{ Reason string }

func (u *Unavailable) Error() string { return u.Reason }

// CacheRoot is the folder builds go to, outside the repository.
func CacheRoot() string {
	if d := os.Getenv("MUSTER_INTEROP_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "muster-interop")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".cache", "muster-interop")
	}
	return filepath.Join(os.TempDir(), "muster-interop")
}

// KindOf says which package manager builds src, from the files in it.
func KindOf(src string) (Kind, bool) {
	switch {
	case exists(filepath.Join(src, "pom.xml")):
		return Maven, true
	case exists(filepath.Join(src, "package-lock.json")):
		return Npm, true
	case exists(filepath.Join(src, "requirements.txt")):
		return Python, true
	}
	return "", false
}

// Build builds the source folder src (relative to the repository root, or
// absolute) with its package manager, once per content of src, and returns
// the folder the build happened in: a copy of src with the package
// manager's output (target/, node_modules/, venv/) beside the sources. log,
// if not nil, gets the build's output as it runs.
func Build(src string, log io.Writer) (string, error) {
	abs, err := filepath.Abs(src)
	if err != nil {
		return "", err
	}
	kind, ok := KindOf(abs)
	if !ok {
		return "", fmt.Errorf("%s: no pom.xml, package-lock.json or requirements.txt", src)
	}
	if err := toolsFor(kind); err != nil {
		return "", err
	}
	shared, err := sharedDirs(abs, kind)
	if err != nil {
		return "", err
	}
	sum, err := hashSources(abs, shared)
	if err != nil {
		return "", err
	}
	root := CacheRoot()
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", &Unavailable{Reason: fmt.Sprintf("cache folder %s: %v", root, err)}
	}
	name := filepath.Base(abs)
	unlock, err := lockFile(filepath.Join(root, name+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	top := filepath.Join(root, name+"-"+sum[:16])
	// A source with shared folders is copied with them, as siblings, so
	// its ../ paths resolve in the copy: top/<name>, top/<shared>.
	dir := top
	if len(shared) > 0 {
		dir = filepath.Join(top, name)
	}
	done := filepath.Join(top, ".muster-built")
	if exists(done) {
		return dir, nil
	}
	_ = os.RemoveAll(top)
	if err := copyTree(abs, dir); err != nil {
		return "", err
	}
	for _, rel := range shared {
		if err := copyTree(filepath.Join(filepath.Dir(abs), rel), filepath.Join(top, rel)); err != nil {
			return "", err
		}
	}
	if log == nil {
		log = io.Discard
	}
	var out strings.Builder
	w := io.MultiWriter(log, &out)
	if err := runBuild(kind, dir, w); err != nil {
		text := out.String()
		if reason, offline := registryUnreachable(text); offline {
			return "", &Unavailable{Reason: fmt.Sprintf("%s build of %s cannot reach its registry (%s)", kind, src, reason)}
		}
		return "", fmt.Errorf("%s build of %s: %v\n%s", kind, src, err, Tail(text, 4000))
	}
	if err := os.WriteFile(done, []byte(sum+"\n"), 0o644); err != nil {
		return "", err
	}
	pruneOlderBuilds(root, name, top)
	return dir, nil
}

// pruneOlderBuilds removes the builds of name's earlier sources but the
// newest other one (a branch switched back and forth builds once each
// way), so the cache does not grow by a Spring Boot app (about 65 MB) per
// source change. It runs under name's lock, so no test is using them.
func pruneOlderBuilds(root, name, keep string) {
	matches, _ := filepath.Glob(filepath.Join(root, name+"-*"))
	type build struct {
		dir  string
		when int64
	}
	var older []build
	for _, m := range matches {
		if m == keep || len(filepath.Base(m)) != len(name)+1+16 {
			continue // this build, or another source whose name starts with name-
		}
		info, err := os.Stat(filepath.Join(m, ".muster-built"))
		if err != nil {
			continue
		}
		older = append(older, build{m, info.ModTime().UnixNano()})
	}
	sort.Slice(older, func(i, j int) bool { return older[i].when > older[j].when })
	for i, b := range older {
		if i >= 1 {
			_ = os.RemoveAll(b.dir)
		}
	}
}

// Built is Build for a test: it skips the test when the build cannot run
// here and fails it when the build fails.
func Built(t testing.TB, src string) string {
	t.Helper()
	dir, err := Build(src, nil)
	var u *Unavailable
	if errors.As(err, &u) {
		t.Skipf("SKIP %s: %s", src, u.Reason)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func toolsFor(kind Kind) error {
	need := map[Kind][]string{Maven: {"java", "mvn"}, Npm: {"node", "npm"}, Python: {"python3"}}[kind]
	for _, tool := range need {
		if _, err := exec.LookPath(tool); err != nil {
			return &Unavailable{Reason: fmt.Sprintf("no %s on PATH (scripts/test.sh installs it as root)", tool)}
		}
	}
	// Debian ships venv's pip bootstrap apart (python3-venv): without it
	// `python3 -m venv` fails, which is a missing toolchain, not a failed
	// build.
	if kind == Python && exec.Command("python3", "-c", "import venv, ensurepip").Run() != nil {
		return &Unavailable{Reason: "python3 cannot make a venv: no ensurepip (Debian: python3-venv; scripts/test.sh installs it as root)"}
	}
	return nil
}

func runBuild(kind Kind, dir string, out io.Writer) error {
	run := func(name string, args ...string) error {
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = dir, out, out
		cmd.Env = append(os.Environ(), "MAVEN_OPTS=-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
		return cmd.Run()
	}
	switch kind {
	case Maven:
		return run("mvn", "-B", "-e", "--no-transfer-progress", "package", "-DskipTests")
	case Npm:
		return run("npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	case Python:
		if err := run("python3", "-m", "venv", "venv"); err != nil {
			return err
		}
		return run(filepath.Join(dir, "venv", "bin", "pip"), "install", "--disable-pip-version-check", "-r", "requirements.txt")
	}
	return fmt.Errorf("unknown kind %q", kind)
}

// registryUnreachable tells a registry that cannot be reached (the machine
// has no network to it) from a build that fails on its own (a version that
// does not exist, a compile error), which must fail the test.
func registryUnreachable(out string) (string, bool) {
	for _, sign := range []string{
		"UnknownHostException", "Unknown host", "Connection refused", "Network is unreachable",
		"Connect timed out", "connect timed out", "Temporary failure in name resolution",
		"ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ENETUNREACH",
		"NewConnectionError", "Failed to establish a new connection", "No route to host",
	} {
		if strings.Contains(out, sign) {
			return sign, true
		}
	}
	return "", false
}

// sharedRef is a folder beside a Maven module that its pom.xml takes
// sources from (a <sourceDirectory> or <compileSourceRoot>, say): the
// Spring client apps of two Boot versions, and the eureka-client drivers
// of two client versions, share their Java sources that way.
var sharedRef = regexp.MustCompile(`\$\{project\.basedir\}/\.\./([A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*)`)

// sharedDirs lists the folders beside src, relative to src's parent, that
// src's pom.xml names as ${project.basedir}/../<folder>: Build hashes and
// copies them with src, so a change to a shared source rebuilds every
// module that uses it.
func sharedDirs(src string, kind Kind) ([]string, error) {
	if kind != Maven {
		return nil, nil
	}
	pom, err := os.ReadFile(filepath.Join(src, "pom.xml"))
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, m := range sharedRef.FindAllSubmatch(pom, -1) {
		rel := filepath.FromSlash(string(m[1]))
		if slices.Contains(dirs, rel) {
			continue
		}
		info, err := os.Stat(filepath.Join(filepath.Dir(src), rel))
		if err != nil || !info.IsDir() {
			return nil, fmt.Errorf("%s/pom.xml names ../%s, which is not a folder beside it", src, m[1])
		}
		dirs = append(dirs, rel)
	}
	sort.Strings(dirs)
	return dirs, nil
}

// hashSources is hashTree(src), or, with shared folders, a hash of it and
// of each shared folder's tree and name.
func hashSources(src string, shared []string) (string, error) {
	sum, err := hashTree(src)
	if err != nil || len(shared) == 0 {
		return sum, err
	}
	h := sha256.New()
	fmt.Fprintf(h, ".\x00%s\x00", sum)
	for _, rel := range shared {
		s, err := hashTree(filepath.Join(filepath.Dir(src), rel))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "../%s\x00%s\x00", filepath.ToSlash(rel), s)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashTree is a hash of every file under dir (paths and contents), leaving
// out what builds put there.
func hashTree(dir string) (string, error) {
	h := sha256.New()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && skipDir(d.Name()) && p != dir {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	for _, f := range files {
		rel, _ := filepath.Rel(dir, f)
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.ToSlash(rel), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func skipDir(name string) bool {
	switch name {
	case "target", "node_modules", "venv", "__pycache__", ".git":
		return true
	}
	return false
}

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			if skipDir(d.Name()) && p != src {
				return filepath.SkipDir
			}
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, info.Mode().Perm())
	})
}

// lockFile holds an exclusive lock on path until the returned func runs,
// so that test binaries running side by side build a source once.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Tail is the last n bytes of s.
func Tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
