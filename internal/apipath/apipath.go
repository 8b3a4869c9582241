// Package apipath forwards to the public package
// github.com/freshinformer/freshinformer/apipath, where the parser moved so
// that freshctrl, a separate module, can use it without reaching into this
// module's internals. New code imports the public package.
package apipath

import "github.com/freshinformer/freshinformer/apipath"

// Target is apipath.Target.
type Target = apipath.Target

// Parse is apipath.Parse.
func Parse(path string) (Target, bool) { return apipath.Parse(path) }
