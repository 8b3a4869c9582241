/*
Copyright 2015 The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package job contains logic for watching and synchronizing jobs.
//
// This is a copy of k8s.io/kubernetes v1.37.2's pkg/controller/job (its
// non-test files, unchanged but for one patch), for kcmbench: upstream's
// NewController builds its consistency store itself from the feature
// gate, so the benchmark could not hand it another. The patch, in
// job_controller.go: NewControllerWithConsistencyStore (NewController with
// the store given, and no scheduling informers), the store parameter of
// newControllerWithClock, and the branch that uses it (the store, and a
// pod-write callback that records pod writes in it as upstream's does).
package job
