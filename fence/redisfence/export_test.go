package redisfence

// FenceSrc and StrictSrc are the scripts' sources, for tests that call
// them as a program outside Go would.
var (
	FenceSrc  = fenceSrc
	StrictSrc = strictSrc
)
