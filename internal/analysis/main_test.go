package analysis

import (
	"os"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	// Retries wait milliseconds, not seconds; TestRetryWait checks the
	// real schedule.
	retryBase = 10 * time.Millisecond
	os.Exit(m.Run())
}
