// Package readme holds the test that keeps the repository's README.md
// true: every Go block in it is marked with the Example function that
// holds its code (<!-- example: DIR EXAMPLE --> on the line before the
// block), and that Example, which go test compiles and runs, must have an
// output comment and contain the block's lines, in order. The Examples of
// the freshctrl module are parsed here, and run by its own go test.
package readme
