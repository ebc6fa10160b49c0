package depcheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxMethods is the most methods a type of ours may declare outside the
// core (registry/) and the assembly (node/): a type above it does several
// things, and its methods belong on smaller types of their own.
const maxMethods = 30

func TestMethods_noTypeOutsideRegistryAndNodeDeclaresMoreThan30(t *testing.T) {
	counts := declaredMethods(t, "../..")
	if len(counts) < 100 {
		t.Fatalf("found methods on %d types only: the walk is broken", len(counts))
	}
	var over []string
	for typ, n := range counts {
		dir, _, _ := strings.Cut(typ, ".")
		if dir == "registry" || strings.HasPrefix(dir, "registry/") || dir == "node" {
			continue
		}
		if n > maxMethods {
			over = append(over, typ)
		}
	}
	sort.Strings(over)
	for _, typ := range over {
		t.Errorf("%s declares %d methods; at most %d outside registry/ and node/: split it", typ, counts[typ], maxMethods)
	}
}

// declaredMethods counts the methods declared on each named type in the
// Go files under root (tests, testdata and hidden folders left out), by
// "folder.Type".
func declaredMethods(t *testing.T, root string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List) == 0 {
				continue
			}
			if typ := receiverType(fd.Recv.List[0].Type); typ != "" {
				counts[filepath.ToSlash(dir)+"."+typ]++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return counts
}

// receiverType is the name of a receiver's type: T, *T, T[P] or *T[P, Q].
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
