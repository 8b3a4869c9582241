package freshness_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/freshinformer/freshinformer/freshness"
)

func ExampleCompare() {
	c, err := freshness.Compare("999", "1000")
	fmt.Println(c, err)

	_, err = freshness.Compare("1000", "abc") // served by a non-conformant aggregated API server
	fmt.Println(errors.Is(err, freshness.ErrIncomparable))
	// Output:
	// -1 <nil>
	// true
}

func ExampleTracker() {
	var tracker freshness.Tracker // the zero value is ready

	done := make(chan error)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- tracker.Wait(ctx, "105") // blocks, costing no CPU, until 105 is applied
	}()

	for _, s := range []string{"101", "104", "107"} { // what a cache applies, in stream order
		rv, _ := freshness.ParseRV(s)
		tracker.Advance(rv)
	}
	fmt.Println(<-done, tracker.Current())

	tracker.Stop()
	err := tracker.Wait(context.Background(), "200")
	fmt.Println(errors.Is(err, freshness.ErrStopped))
	// Output:
	// <nil> 107
	// true
}

func ExampleWaitError() {
	var tracker freshness.Tracker
	rv, _ := freshness.ParseRV("41")
	tracker.Advance(rv)

	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	err := tracker.Wait(ctx, "42")

	var we *freshness.WaitError
	if errors.As(err, &we) {
		fmt.Println(we.Target, we.Current, errors.Is(err, context.DeadlineExceeded))
	}
	// Output: 42 41 true
}

// A callback at a resource version that can be called off: a caller that
// gives up leaves nothing registered on the tracker.
func ExampleTracker_AfterFunc() {
	var tracker freshness.Tracker
	at := func(s string) freshness.RV { rv, _ := freshness.ParseRV(s); return rv }

	tracker.AfterFunc(at("20"), func(err error) { fmt.Println("reached 20:", err) })
	stop := tracker.AfterFunc(at("30"), func(error) { fmt.Println("never printed") })

	tracker.Advance(at("25")) // runs the first callback, on this goroutine
	fmt.Println("called off:", stop())
	tracker.Advance(at("30"))

	tracker.Stop()
	tracker.AfterFunc(at("40"), func(err error) { fmt.Println("after Stop:", errors.Is(err, freshness.ErrStopped)) })
	// Output:
	// reached 20: <nil>
	// called off: true
	// after Stop: true
}

// A resource version compared as a string each time, or parsed once.
func ExampleParseRV() {
	c, err := freshness.Compare("999", "1000") // -1, nil: identical to apimachinery's CompareResourceVersion
	fmt.Println(c, err)
	rv, err := freshness.ParseRV("105") // parsed once; RV.Compare is then one integer comparison
	applied, _ := freshness.ParseRV("104")
	fmt.Println(rv, err, rv.Compare(applied))
	// Output:
	// -1 <nil>
	// 105 <nil> 1
}
