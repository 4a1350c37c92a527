package safety

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that the tests (which run bash to compare with it)
// leave no goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
