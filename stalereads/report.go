package stalereads

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// EnvVar is the environment variable that turns the detector on without a
// code change: a comma-separated list of key=value settings, in the spirit
// of GODEBUG. The detector's key is stalereads:
//
//	FRESHINFORMER_DEBUG=stalereads=1     every informer and writes transport detects; reports are counted, and logged unless a handler takes them
//	FRESHINFORMER_DEBUG=stalereads=halt  the same, and the first report no handler takes panics, with the report, on the goroutine that read or wrote stale
//	FRESHINFORMER_DEBUG=stalereads=0     no effect (the options still turn it on)
//
// Each informer and transport reads it when it is made: the setting is
// the instance's from then on. Other keys are ignored.
const EnvVar = "FRESHINFORMER_DEBUG"

// HaltExitStatus was the exit status of a process ended by
// stalereads=halt.
//
// Deprecated: halt mode no longer ends the process itself: it panics
// with the report, as client-go's cache mutation detector does, and the
// process ends (exit status 2) unless the goroutine recovers.
const HaltExitStatus = 66

// Kind says what was stale.
type Kind int

// The kinds of report.
const (
	// ReadOlder: a read returned the key at a resource version older than
	// this process's own write of it.
	ReadOlder Kind = iota + 1
	// ReadDeleted: a read returned an object (same UID) that this process
	// had deleted.
	ReadDeleted
	// ReadMissing: a read returned no object for a key this process had
	// written (created, or updated into the informer's scope).
	ReadMissing
	// WriteOlder: an update or patch carried a resource version older than
	// this process's own last write of the key. An update (or a patch with
	// that precondition) gets a 409 Conflict; it was built from stale
	// state.
	WriteOlder
)

// String names the kind as reports print it.
func (k Kind) String() string {
	switch k {
	case ReadOlder:
		return "stale read (older than this process's write)"
	case ReadDeleted:
		return "stale read (deleted by this process)"
	case ReadMissing:
		return "stale read (missing this process's write)"
	case WriteOlder:
		return "stale write (sent on older state than this process's write)"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Report describes one stale read or write.
type Report struct {
	Kind     Kind
	Resource schema.GroupResource
	// Informer is the name of the informer read from (cache.WithName), ""
	// if unnamed or for a write.
	Informer string
	// Key is the object's namespace/name (name for a cluster-scoped one).
	Key string
	// Op is the read (Get, GetByKey, List, ByIndex, Index) or the write
	// (update, patch).
	Op string
	// ResourceVersion is what the read returned for the key or what the
	// write carried; "" when the read returned no object.
	ResourceVersion string
	// UID is the returned object's, for ReadDeleted.
	UID types.UID
	// WrittenResourceVersion is the resource version of this process's
	// own write of the key ("" for a delete answered without one).
	WrittenResourceVersion string
	// CacheResourceVersion is the resource version the informer had
	// applied when the read began ("" for a write).
	CacheResourceVersion string
	// SinceWrite is how long after this process's write the read or the
	// write came.
	SinceWrite time.Duration
	// Stack is the stack of the read or write, as the race detector
	// prints one; "" when it was not sampled (the detector captures a
	// bounded number of stacks per second).
	Stack string
}

// String formats the report for people, as the race detector formats a
// race: what was read, what this process had written and when, and where.
func (r Report) String() string {
	var b strings.Builder
	b.WriteString("==================\n")
	if r.Kind == WriteOlder {
		b.WriteString("WARNING: STALE WRITE\n")
	} else {
		b.WriteString("WARNING: STALE READ\n")
	}
	what := r.Resource.String() + " " + r.Key
	if r.Informer != "" {
		what += fmt.Sprintf(" (informer %q)", r.Informer)
	}
	since := r.SinceWrite.Round(time.Microsecond)
	written := "resourceVersion " + r.WrittenResourceVersion
	if r.WrittenResourceVersion == "" {
		written = "a delete without resourceVersion"
	}
	switch r.Kind {
	case ReadOlder:
		fmt.Fprintf(&b, "%s of %s returned resourceVersion %s,\nolder than %s this process wrote %v before",
			r.Op, what, r.ResourceVersion, written, since)
	case ReadDeleted:
		fmt.Fprintf(&b, "%s of %s returned the object (uid %s, resourceVersion %s)\nthat this process deleted %v before",
			r.Op, what, r.UID, r.ResourceVersion, since)
	case ReadMissing:
		fmt.Fprintf(&b, "%s of %s returned no object,\nthough this process wrote it at %s %v before",
			r.Op, what, written, since)
	case WriteOlder:
		fmt.Fprintf(&b, "%s of %s carries resourceVersion %s,\nolder than %s this process wrote %v before: a conflict, or newer state overwritten",
			r.Op, what, r.ResourceVersion, written, since)
	default:
		fmt.Fprintf(&b, "%v: %s of %s", r.Kind, r.Op, what)
	}
	if r.CacheResourceVersion != "" {
		fmt.Fprintf(&b, " (the cache was at %s)", r.CacheResourceVersion)
	}
	b.WriteString(".\n")
	if r.Stack != "" {
		if r.Kind == WriteOlder {
			b.WriteString("Sent at:\n")
		} else {
			b.WriteString("Read at:\n")
		}
		b.WriteString(r.Stack)
	}
	b.WriteString("==================")
	return b.String()
}
