package main

import "time"

// A suite is one upstream test package ported against the shim.
type suite struct {
	// Name is how reports and docs name the suite.
	Name string
	// Dir is the generated package's directory under the work directory.
	Dir string
	// Module and Pkg locate upstream's test files: Pkg's directory in the
	// Go module cache, at the version the suite's home module requires.
	Module, Pkg string
	// Home is the module the suite is ported, built and run in, relative
	// to the integration module ("": the integration module itself). A
	// suite of k8s.io/kubernetes lives in kcmbench, the one module that
	// may require it.
	Home string
	// Selected lists the files whose tests (Test functions, Describe
	// blocks) run; nil means every test file. Every other test file of
	// the package contributes only its helpers.
	Selected []string
	// CopyDirs are directories of the package copied next to the
	// generated files (envtest reads CRDs from ./testdata).
	CopyDirs []string
	// Swap maps an upstream constructor, "importpath.Name", to the shim
	// function that replaces it.
	Swap map[string]string
	// Shim is the shim package's import path, if not package shim.
	Shim string
	// Assert maps an upstream unexported type that tests assert the
	// constructor's result to (x.(*T)) to the exported interface the
	// assertion is rewritten to.
	Assert map[string]string
	// Envtest: the suite starts envtest; Start is routed through the shim
	// so that its processes are recorded for the reaper.
	Envtest bool
	// PerTest runs every top-level Go test in a process of its own, so a
	// panic that kills the binary costs only that test.
	PerTest bool
	// CacheBacked: run only the specs that build a cache or a client
	// with a cache reader (ginkgo --focus-file on their nodes).
	CacheBacked bool
	// WholePackage ports the package's other files too and keeps its
	// name: the tests of a main package (a controller) run on its own
	// code, with the constructors swapped there as well.
	WholePackage bool
	// Runs, if set, runs the whole test binary that many times with
	// -test.count=Count: a test passes only if it passed every time.
	Runs, Count int
	// Timeout bounds one run of the test binary.
	Timeout time.Duration
}

const (
	clientGo         = "k8s.io/client-go"
	crModule         = "sigs.k8s.io/controller-runtime"
	sampleController = "k8s.io/sample-controller"
	kubernetes       = "k8s.io/kubernetes"
	kcmShim          = integrationModule + "/kcmbench/conformanceshim"
)

var suites = []suite{{
	Name:     "client-go tools/cache shared informer tests",
	Dir:      "clientgo_cache",
	Module:   clientGo,
	Pkg:      clientGo + "/tools/cache",
	Selected: []string{"shared_informer_test.go", "mutation_detector_test.go"},
	Swap: map[string]string{
		clientGo + "/tools/cache.NewSharedInformer":                 "NewSharedInformer",
		clientGo + "/tools/cache.NewSharedIndexInformer":            "NewSharedIndexInformer",
		clientGo + "/tools/cache.NewSharedIndexInformerWithOptions": "NewSharedIndexInformerWithOptions",
	},
	Assert:  map[string]string{"sharedIndexInformer": "SharedIndexInformer"},
	PerTest: true,
	Timeout: 2 * time.Minute,
}, {
	Name:   "controller-runtime pkg/cache suite",
	Dir:    "cr_cache",
	Module: crModule,
	Pkg:    crModule + "/pkg/cache",
	Swap: map[string]string{
		crModule + "/pkg/cache.New":  "NewCache",
		crModule + "/pkg/client.New": "NewClient",
	},
	Envtest: true,
	Timeout: 6 * time.Minute,
}, {
	Name:     "controller-runtime pkg/client cache-backed specs",
	Dir:      "cr_client",
	Module:   crModule,
	Pkg:      crModule + "/pkg/client",
	Selected: []string{"client_suite_test.go", "client_test.go", "consistency_envtest_test.go"},
	CopyDirs: []string{"testdata"},
	Swap: map[string]string{
		crModule + "/pkg/cache.New":  "NewCache",
		crModule + "/pkg/client.New": "NewClient",
	},
	Envtest:     true,
	CacheBacked: true,
	Timeout:     4 * time.Minute,
}, {
	// sample-controller's own unit tests, the canonical client-go
	// controller's: its kube informer factory becomes the drop-in factory
	// and its code-generated factory's Foo informer a FreshInformer
	// (cache.InformerFor), in its tests and its code alike.
	Name:         "sample-controller unit tests",
	Dir:          "samplecontroller",
	Module:       sampleController,
	Pkg:          sampleController,
	WholePackage: true,
	Shim:         shimPath + "/clientgoshim",
	Swap: map[string]string{
		clientGo + "/informers.NewSharedInformerFactory":                                        "NewKubeSharedInformerFactory",
		sampleController + "/pkg/generated/informers/externalversions.NewSharedInformerFactory": "NewSampleSharedInformerFactory",
	},
	Runs:    10,
	Count:   100,
	Timeout: 5 * time.Minute,
},
	// kube-controller-manager's controllers the KEP-5647 store was built
	// for, with their unit tests (issue 38).
	kcmSuite("ReplicaSet", "replicaset", 3, 10),
	kcmSuite("Job", "job", 2, 2),
	kcmSuite("DaemonSet", "daemon", 3, 3),
	kcmSuite("StatefulSet", "statefulset", 1, 1, "testdata"),
}

// kcmSuite is the package of kube-controller-manager's controller in
// pkg/controller/pkg, whole, with its unit tests, ported into kcmbench (the
// one module that may require k8s.io/kubernetes): the informer factory its
// tests build becomes the drop-in factory.
func kcmSuite(name, pkg string, runs, count int, copyDirs ...string) suite {
	return suite{
		Name:         "kube-controller-manager " + name + " controller unit tests",
		Dir:          "kcm_" + pkg,
		Module:       kubernetes,
		Pkg:          kubernetes + "/pkg/controller/" + pkg,
		Home:         "kcmbench",
		WholePackage: true,
		CopyDirs:     copyDirs,
		Shim:         kcmShim,
		Swap:         map[string]string{clientGo + "/informers.NewSharedInformerFactory": "NewKubeSharedInformerFactory"},
		Runs:         runs,
		Count:        count,
		Timeout:      10 * time.Minute,
	}
}
