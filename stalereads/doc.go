// Package stalereads describes the stale-read detector: it finds, as Go's
// race detector finds races, every read through an informer that returns
// older state than this process has already written, and every write sent
// on such state.
//
// # What it reports
//
// A stale read is a read through a FreshInformer's indexer (Get, GetByKey,
// List, ByIndex, Index), and so through client-go's typed listers and
// controller-runtime's cached client (freshctrl), that returns, for a key
// this process wrote and before the cache applied that write:
//
//   - the key at an older resource version than the write's (ReadOlder);
//   - an object this process deleted, by UID, as it was before the delete
//     (ReadDeleted);
//   - no object, where the write put one in the informer's scope
//     (ReadMissing). A List (of all namespaces, or of one through
//     toolscache.NamespaceIndex, as listers and controller-runtime list
//     a namespace) checks the written keys of its scope that it does not
//     return as well as those it does.
//
// A stale write (WriteOlder) is an update or patch sent through a writes
// transport (package writes) whose resourceVersion precondition is older
// than the newest resource version that transport recorded for the
// object: it gets a 409 Conflict (or, for a patch without the
// precondition, would overwrite newer state: those cannot be told). It is
// reported and sent on unchanged.
//
// "This process wrote" means recorded: writes through a writes transport
// with an owner in their context, ReadYourWrites.Record and RecordDelete
// (Wrote, Deleted), FreshInformer.RecordWrittenObject, and every write
// through freshctrl's client. A read is judged only against writes
// recorded before it began, and only while the cache had not applied the
// write when it began, so a report is never a guess: the read returned
// state that the write had already replaced. Informers wrapped with
// cache.Wrap are not checked.
//
// # Turning it on
//
// It is off by default, and off costs nothing: GetIndexer returns the
// plain indexer. It is decided once, when an informer (or transport) is
// made, by any of:
//
//   - cache.WithStaleReadDetection(onReport) on an informer, or through a
//     factory with cache.WithInformerOptions;
//   - freshctrl.Options{DetectStaleReads: true} for a controller-runtime
//     manager's cache;
//   - writes.WithStaleWriteDetection(onReport) on a writes transport;
//   - the environment variable FRESHINFORMER_DEBUG=stalereads=1 (EnvVar),
//     for every informer and transport made from then on, without a code
//     change; stalereads=halt also fails at the first report no onReport
//     handler takes, as the race detector's halt_on_error does: it logs
//     the report and panics with it on the goroutine that read or wrote
//     stale, as client-go's cache mutation detector does. The library
//     never calls os.Exit: a goroutine that does not recover ends the
//     process; one that recovers (controller-runtime's RecoverPanic)
//     gets the report as the panic's value.
//
// Switched on, and unless a handler takes the log's place (below), each
// informer logs one line when it starts saying so (its name, resource,
// scope and mode), and each writes transport one at its first write: with
// it on and nothing stale, the log tells it from off.
// FreshInformer.StaleReads says whether it is on, in code.
//
// In unit tests, freshtest.FailOnStaleReads(t) (client-go fakes) and
// freshctrl/fake's ClientBuilder.FailOnStaleReads(t) fail the test with
// each report; freshtest.Lag and freshctrl/fake's PauseInformers hold an
// informer's events back on demand, so a test shows deterministically
// which reads a controller makes stale.
//
// # Reports
//
// Every report is counted by its owner: an informer counts its stale reads
// (FreshInformer.StaleReads), which its metrics.Provider exports as
// freshinformer_stale_reads_total with the informer's labels; a writes
// transport counts its stale writes on the counter given with
// writes.WithStaleWriteCounter (a metrics.Provider:
// freshinformer_stale_writes_total). No count is process-wide.
//
// A report then goes to the onReport handler, if any, on the reading
// goroutine, in place of the log: it is not logged unless asked for too
// (cache.WithStaleReadLogging, writes.WithStaleWriteLogging,
// freshctrl.Options.LogStaleReads). Without a handler, reports are logged
// through klog at error level, through the informer's run's logger (the
// request's for a transport), naming the informer, its resource and scope,
// with the stack of the read or write. Stacks are taken for ten reports at
// once, then one per second per informer (and per transport): only those
// reports are logged, and the number of the others since is logged with
// the next; a handler gets every report, the others without a stack.
// Report.String formats one for people.
//
// # Cost
//
// On, a read of a key with no recorded write pending costs one atomic
// load while no write is pending, and one hash of the object's name and
// one more atomic load while some are; it allocates nothing
// (BenchmarkListerGet in this package, side by side with a plain lister).
// Reads of written keys take a read lock and compare resource versions.
// Memory: at most 4096 pending writes per informer (the recorded-write
// bound of lost-write detection), pruned as the cache applies them, and
// 16 KiB of filters, made at the informer's first recorded write; a writes
// transport remembers the resource versions of the 4096 objects it wrote
// last.
package stalereads
