// Package lint holds the test that keeps the library's shape. It parses
// every non-test, non-generated Go file of the library (the root module's
// packages and freshctrl's; not integration/, examples/, cmd/, hack/ or
// testdata, and not files whose header says "Code generated ... DO NOT
// EDIT.") and fails, naming file:line and the rule, on:
//
//   - func-length: a function or method longer than 60 lines, from func to
//     its closing brace. Past that a reader cannot hold it at once; split it
//     into functions whose names say what they do.
//   - unsafe: an import of "unsafe". The library reads nothing behind Go's
//     type system.
//   - os-exit: any use of os.Exit. A library reports failures to its
//     caller; it never ends the process.
//   - package-var: a package-level var, that is, state shared by every user
//     of the package in the process. A value the code needs is a const, a
//     function that returns it, or a field of the value that uses it.
//
// A command (package main, such as the library's code generator) owns its
// process: only func-length and unsafe apply to it.
//
// Three kinds of package-level var are immutable by convention and allowed:
// a compile-time assertion (var _ I = ...); a sentinel error (a name Err...
// or err... whose value is errors.New(...) or another package's sentinel,
// pkg.ErrX); and a value made by one of a few constructors whose result
// cannot change (immutableConstructors in the test, each with its reason).
// A lookup table (a slice or map literal) is not among them: nothing stops
// a caller or a later change from writing to it, so it is a function.
//
// A second test keeps benchmark output (go test -bench logs) out of the
// committed tree except under docs/, where it is explained, and checks that
// .gitignore covers bench.txt, make bench's output.
//
// The checker works on syntax alone (go/parser), so it is fast and needs no
// build; its unit test runs it on small in-memory files. Functions that
// other work is splitting at the time of writing are listed in
// pendingSplit; an entry that no longer applies fails the test, so the list
// only shrinks.
package lint
