package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRespScannerCountsCommandsAcrossWrites(t *testing.T) {
	t.Parallel()
	// SET with a payload that looks like a command, then PING inline.
	stream := []byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$6\r\n*1\r\n$1\r\n*1\r\n$4\r\nPING\r\nPING\r\n")
	for cut := range len(stream) {
		scan := respScanner()
		n := scan(stream[:cut]) + scan(stream[cut:])
		require.Equal(t, int64(3), n, "cut at %d", cut)
	}
}

func TestPgScannerCountsQueryAndExecute(t *testing.T) {
	t.Parallel()
	msg := func(typ byte, body string) []byte {
		l := len(body) + 4
		return append([]byte{typ, byte(l >> 24), byte(l >> 16), byte(l >> 8), byte(l)}, body...)
	}
	// SSLRequest, StartupMessage, then Parse/Bind/Execute/Sync and a simple
	// Query whose text contains the letters E and Q.
	stream := []byte{0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f}
	stream = append(stream, 0, 0, 0, 9, 0, 3, 0, 0, 0)
	stream = append(stream, msg('P', "\x00SELECT 'EQ'\x00\x00\x00")...)
	stream = append(stream, msg('B', "\x00\x00\x00\x00\x00\x00\x00")...)
	stream = append(stream, msg('E', "\x00\x00\x00\x00\x00")...)
	stream = append(stream, msg('S', "")...)
	stream = append(stream, msg('Q', "SELECT 'E'\x00")...)
	for cut := range len(stream) {
		scan := pgScanner()
		n := scan(stream[:cut]) + scan(stream[cut:])
		require.Equal(t, int64(2), n, "cut at %d", cut)
	}
}
