package security

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// A reader of the heap dumps runtime/debug.WriteHeapDump writes (format
// "go1.7 heap dump", https://go.dev/wiki/heapdump15-through-heapdump17):
// the live objects and, when the process runs with
// GODEBUG=memprofilerate=1, where each was allocated.

// heapObject is one live object of a dump.
type heapObject struct {
	addr     uint64
	contents []byte
	// allocatedBy is the stack that allocated it, innermost first, as
	// "function:line" (empty when the profile did not sample it).
	allocatedBy []string
}

// readHeapDump returns the live objects of a dump.
func readHeapDump(dump []byte) ([]heapObject, error) {
	const header = "go1.7 heap dump\n"
	if !bytes.HasPrefix(dump, []byte(header)) {
		return nil, errors.New("not a go1.7 heap dump")
	}
	r := &dumpReader{r: bufio.NewReader(bytes.NewReader(dump[len(header):]))}
	var objects []heapObject
	stacks := map[uint64][]string{}
	sampled := map[uint64]uint64{}
	for r.err == nil {
		switch tag := r.uvarint(); tag {
		case 0: // EOF
			return withStacks(objects, sampled, stacks), nil
		case 1: // object: address, contents, fields
			o := heapObject{addr: r.uvarint(), contents: r.bytes()}
			r.fields()
			objects = append(objects, o)
		case 2: // other root
			r.bytes()
			r.uvarint()
		case 3: // type
			r.uvarints(2)
			r.bytes()
			r.uvarint()
		case 4: // goroutine
			r.uvarints(8)
			r.bytes()
			r.uvarints(4)
		case 5: // stack frame
			r.uvarints(3)
			r.bytes()
			r.uvarints(3)
			r.bytes()
			r.fields()
		case 6: // parameters
			r.uvarints(4)
			r.bytes()
			r.bytes()
			r.uvarint()
		case 7, 11: // finalizer, queued finalizer
			r.uvarints(5)
		case 8: // itab
			r.uvarints(2)
		case 9: // OS thread
			r.uvarints(3)
		case 10: // memstats: 24 counters, 256 pauses, the GC count
			r.uvarints(24 + 256 + 1)
		case 12, 13: // data, bss
			r.uvarint()
			r.bytes()
			r.fields()
		case 14: // defer
			r.uvarints(7)
		case 15: // panic
			r.uvarints(6)
		case 16: // profile bucket: address, size, frames, allocs, frees
			bucket := r.uvarint()
			r.uvarint()
			frames := make([]string, r.uvarint())
			for i := range frames {
				fn, _ := string(r.bytes()), r.bytes()
				frames[i] = fmt.Sprintf("%s:%d", fn, r.uvarint())
			}
			r.uvarints(2)
			stacks[bucket] = frames
		case 17: // allocation sample: object, bucket
			obj := r.uvarint()
			sampled[obj] = r.uvarint()
		default:
			return nil, fmt.Errorf("heap dump: unknown record %d", tag)
		}
	}
	return nil, fmt.Errorf("heap dump: %w", r.err)
}

func withStacks(objects []heapObject, sampled map[uint64]uint64, stacks map[uint64][]string) []heapObject {
	for i := range objects {
		if b, ok := sampled[objects[i].addr]; ok {
			objects[i].allocatedBy = stacks[b]
		}
	}
	return objects
}

type dumpReader struct {
	r   *bufio.Reader
	err error
}

func (d *dumpReader) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, err := binary.ReadUvarint(d.r)
	if err != nil {
		d.err = err
	}
	return v
}

func (d *dumpReader) uvarints(n int) {
	for range n {
		d.uvarint()
	}
}

func (d *dumpReader) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(d.r, b); err != nil {
		d.err = err
	}
	return b
}

// fields skips a field list: (kind, offset) pairs ending with kind 0.
func (d *dumpReader) fields() {
	for d.err == nil && d.uvarint() != 0 {
		d.uvarint()
	}
}

// receiveBuffer tells whether an object is one of the buffers of the
// process's HTTP/2 connection to the API server that hold the bytes most
// recently received on it (the connection's read buffer, TLS record
// buffer, frame buffer and stream data chunks). They are Go's, reused in
// place, and overwritten by what the connection carries next; nothing of
// configward's or client-go's decoding is among them.
func receiveBuffer(o heapObject) bool {
	for _, f := range o.allocatedBy {
		if strings.HasPrefix(f, "golang.org/x/net/http2.(*ClientConn).readLoop:") ||
			strings.HasPrefix(f, "golang.org/x/net/http2.(*Transport).newClientConn:") {
			return true
		}
	}
	return false
}
