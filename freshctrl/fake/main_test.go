package fake_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test and example stops its fake: nothing may be left running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
