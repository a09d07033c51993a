package doctor

import (
	"fmt"
	"time"

	"github.com/tenure-dev/tenure"
)

// EnvClockOffset names the environment variable that shifts the wall clock
// doctor compares with the store's, for drills: TENURE_DOCTOR_CLOCK_OFFSET=-504h
// plays a host three weeks behind. It moves the wall reading only, as a
// host whose clock is set wrong would; the monotonic reading is untouched.
const EnvClockOffset = "TENURE_DOCTOR_CLOCK_OFFSET"

// OffsetClock returns base with its wall reading shifted by offset.
func OffsetClock(base tenure.Clock, offset time.Duration) tenure.Clock {
	return offsetClock{base: base, offset: offset}
}

type offsetClock struct {
	base   tenure.Clock
	offset time.Duration
}

func (c offsetClock) Now() (time.Time, time.Duration) {
	wall, mono := c.base.Now()
	return wall.Add(c.offset), mono
}

// ParseClockOffset reads the value of [EnvClockOffset]: a Go duration,
// possibly negative; empty means none.
func ParseClockOffset(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s=%q is not a duration; write one such as -504h or 90s, or unset it", EnvClockOffset, s)
	}
	return d, nil
}
