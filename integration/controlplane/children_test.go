package controlplane

import "testing"

// The process started is the child that was not running before its start,
// whatever the PIDs: after the kernel's PIDs wrap around (pid_max 32768 on
// many machines, reached within a cold build's thousands of compiler
// processes), a process started later has a lower PID than one started
// before it. Taking the highest PID then recorded another plane's
// kube-apiserver as this one's, and KillAPIServer killed the shared plane
// of the whole test binary.
func TestStartedChildIsTheNewOneAfterPIDsWrap(t *testing.T) {
	for _, tc := range []struct {
		name        string
		before, now []int
		known       []int
		want        int
	}{
		{"pids wrapped", []int{32600}, []int{32600, 1200}, nil, 1200},
		{"in order", []int{500}, []int{500, 900}, nil, 900},
		{"another component's", nil, []int{700, 800}, []int{800}, 700},
		{"none new", []int{32600}, []int{32600}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := startedChild(tc.now, set(tc.before), set(tc.known)); got != tc.want {
				t.Fatalf("startedChild(now %v, before %v, known %v) = %d, want %d", tc.now, tc.before, tc.known, got, tc.want)
			}
		})
	}
}

func set(pids []int) map[int]bool {
	m := make(map[int]bool, len(pids))
	for _, p := range pids {
		m[p] = true
	}
	return m
}
