package main

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

type listedPackage struct {
	ImportPath                               string
	Imports, Deps, TestImports, XTestImports []string
}

// TestLayering holds every import of every package of the module to the
// list of parts in docs/architecture.md: it fails on a package in no part,
// on an import between parts that the list does not draw, on an arrow that
// no import uses, and on an outside package a part must keep away from.
func TestLayering(t *testing.T) {
	t.Parallel()
	f, err := os.Open(architectureDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	arch, err := readArchitecture(f)
	if err != nil {
		t.Fatalf("%s: %v", architectureDoc, err)
	}
	// used and usedByTests are the arrows the code draws, "from → to".
	used, usedByTests := map[string]bool{}, map[string]bool{}
	listed := map[string]bool{}
	for _, pkg := range listPackages(t) {
		listed[pkg.ImportPath] = true
		p, ok := arch.byPkg[pkg.ImportPath]
		if !ok {
			t.Errorf("%s is in no part: add it to a part in %s, with its arrows and why", pkg.ImportPath, architectureDoc)
			continue
		}
		for _, to := range arch.edges(t, pkg.ImportPath, p, pkg.Imports, p.uses) {
			used[p.name+" → "+to] = true
		}
		allowed := map[string]bool{}
		for name := range p.uses {
			allowed[name] = true
		}
		for name := range p.tests {
			allowed[name] = true
		}
		for _, to := range arch.edges(t, pkg.ImportPath+"'s tests", p, slices.Concat(pkg.TestImports, pkg.XTestImports), allowed) {
			usedByTests[p.name+" → "+to] = true
		}
		for _, f := range p.reaches {
			if slices.Contains(pkg.Deps, f) {
				t.Errorf("%s (%s) must not depend on %s, even through another package", pkg.ImportPath, p.name, f)
			}
		}
		for _, f := range p.imports {
			if slices.Contains(pkg.Imports, f) {
				t.Errorf("%s (%s) must not import %s", pkg.ImportPath, p.name, f)
			}
		}
	}
	arch.checkDrawn(t, listed, used, usedByTests)
}

// listPackages lists the module's packages with their imports.
func listPackages(t *testing.T) []listedPackage {
	t.Helper()
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports,Deps,TestImports,XTestImports", mod+"/...").Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("go list: %v\n%s", err, exit.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var pkg listedPackage
		if err := dec.Decode(&pkg); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		pkgs = append(pkgs, pkg)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages")
	}
	return pkgs
}

// edges checks each import of the module from pkg (in part p) against
// allowed, and returns the parts it reaches outside its own.
func (a *architecture) edges(t *testing.T, from string, p *part, imports []string, allowed map[string]bool) []string {
	t.Helper()
	var reached []string
	for _, imp := range imports {
		if imp != mod && !strings.HasPrefix(imp, mod+"/") {
			continue
		}
		to, ok := a.byPkg[imp]
		switch {
		case !ok:
			t.Errorf("%s imports %s, which is in no part", from, imp)
		case to == p:
		case !allowed[to.name]:
			t.Errorf("%s (%s) imports %s (%s): %s draws no such arrow", from, p.name, imp, to.name, architectureDoc)
		default:
			reached = append(reached, to.name)
		}
	}
	return reached
}

// checkDrawn fails on what the list draws and the code does not have: a
// stale package or arrow misleads its reader as much as a missing one.
func (a *architecture) checkDrawn(t *testing.T, listed, used, usedByTests map[string]bool) {
	t.Helper()
	for _, p := range a.parts {
		for _, pkg := range p.pkgs {
			if !listed[pkg] {
				t.Errorf("%s lists %s in part %s, but there is no such package", architectureDoc, pkg, p.name)
			}
		}
		for _, to := range sortedKeys(p.uses) {
			if !used[p.name+" → "+to] {
				t.Errorf("%s draws %s → %s, but no code of %s imports %s: remove the arrow (or make it a tests arrow)", architectureDoc, p.name, to, p.name, to)
			}
		}
		for _, to := range sortedKeys(p.tests) {
			switch {
			case p.uses[to]:
				t.Errorf("%s draws %s → %s twice, for its code and for its tests: the tests may use what the code may", architectureDoc, p.name, to)
			case !usedByTests[p.name+" → "+to]:
				t.Errorf("%s draws tests of %s → %s, but no test of %s imports %s: remove the arrow", architectureDoc, p.name, to, p.name, to)
			}
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
