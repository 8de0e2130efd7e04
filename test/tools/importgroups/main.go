// Command importgroups checks the import blocks of Go files: the standard
// library first, then other modules, then this module's own packages, each
// group once, separated by a blank line. gofmt sorts within a group but
// cannot tell a group in the wrong place, and merges left such groups
// behind; `make lint` runs this on every tracked Go file.
//
// Usage: importgroups -module github.com/configward/configward [FILE...]
// (without FILE arguments, the file names are read from standard input,
// one a line).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
)

func main() {
	module := flag.String("module", "", "the module path whose packages form the last group")
	flag.Parse()
	if *module == "" {
		fmt.Fprintln(os.Stderr, "importgroups: -module is required")
		os.Exit(2)
	}
	files := flag.Args()
	if len(files) == 0 {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if f := strings.TrimSpace(sc.Text()); f != "" {
				files = append(files, f)
			}
		}
	}
	bad := 0
	for _, file := range files {
		problems, err := check(file, *module)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for _, p := range problems {
			fmt.Println(p)
			bad++
		}
	}
	if bad > 0 {
		fmt.Printf("%d import group problem(s): order the imports as standard library, other modules, %s, one blank-line-separated group each\n", bad, *module)
		os.Exit(1)
	}
}

// class is the group an import path belongs in, in the order groups come.
func class(path, module string) int {
	switch {
	case path == module || strings.HasPrefix(path, module+"/"):
		return 2
	case !strings.Contains(strings.SplitN(path, "/", 2)[0], "."):
		return 0 // the standard library has no dot in its first element
	default:
		return 1
	}
}

var groupNames = []string{"the standard library", "other modules", "this module"}

// check reports the problems of one file's import declarations.
func check(file, module string) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.ImportsOnly|parser.ParseComments)
	if err != nil {
		return nil, err
	}
	var problems []string
	lastLine, lastClass, groupStart := -1, -1, -1
	seen := map[int]bool{}
	groupClass := -1
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			return nil, err
		}
		pos := fset.Position(imp.Pos())
		line := pos.Line
		if imp.Doc != nil {
			line = fset.Position(imp.Doc.Pos()).Line
		}
		c := class(path, module)
		newGroup := lastLine < 0 || line > lastLine+1
		if newGroup {
			if groupClass >= 0 {
				seen[groupClass] = true
			}
			groupClass, groupStart = c, pos.Line
			if seen[c] {
				problems = append(problems, fmt.Sprintf("%s: a second group of %s imports", pos, groupNames[c]))
			} else if c < lastClass {
				problems = append(problems, fmt.Sprintf("%s: %s imports come after %s ones", pos, groupNames[c], groupNames[lastClass]))
			}
		} else if c != groupClass {
			problems = append(problems, fmt.Sprintf("%s: %q (%s) is in the group of %s that starts on line %d", pos, path, groupNames[c], groupNames[groupClass], groupStart))
		}
		lastLine, lastClass = fset.Position(imp.End()).Line, max(lastClass, c)
	}
	return problems, nil
}
