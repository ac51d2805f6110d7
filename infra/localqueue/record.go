package localqueue

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/runtwice/twice/shared/queue"
)

// Layout: one top-level bucket per queue ("queue:NAME") holding
//
//	m: seq (8 bytes, big-endian) -> record
//	v: visibleAt (8 bytes, big-endian unix ns) + seq -> empty
//
// so a receive reads the visibility index in order and stops at the first key in the future.
var (
	msgsBucket = []byte("m")
	visBucket  = []byte("v")
)

func bucketName(queueName string) []byte { return []byte("queue:" + queueName) }

func nameTag(queueName string) uint32 { return crc32.ChecksumIEEE([]byte(queueName)) }

type queueBuckets struct {
	root, msgs, vis *bolt.Bucket
}

func (q *Queue) buckets(tx *bolt.Tx) (queueBuckets, error) {
	root := tx.Bucket(bucketName(q.name))
	if root == nil {
		return queueBuckets{}, fmt.Errorf("%w: %s", queue.ErrNoQueue, q.name)
	}
	return queueBuckets{root: root, msgs: root.Bucket(msgsBucket), vis: root.Bucket(visBucket)}, nil
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

func visKey(visibleAt int64, seq []byte) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(max(visibleAt, 0)))
	return append(k, seq...)
}

// put stores a new message under the queue's next sequence number.
func (qb queueBuckets) put(enc []byte, visibleAt int64) error {
	n, err := qb.root.NextSequence()
	if err != nil {
		return err
	}
	seq := seqKey(n)
	if err := qb.msgs.Put(seq, enc); err != nil {
		return err
	}
	return qb.vis.Put(visKey(visibleAt, seq), nil)
}

// get returns the message and its visibility key, or nil if it is gone.
func (qb queueBuckets) get(seq []byte) (*record, []byte, error) {
	v := qb.msgs.Get(seq)
	if v == nil {
		return nil, nil, nil
	}
	rec, err := decodeRecord(v)
	if err != nil {
		return nil, nil, err
	}
	return &rec, visKey(rec.visibleAt, seq), nil
}

func (qb queueBuckets) update(seq, oldVisKey []byte, rec record) error {
	if err := qb.vis.Delete(oldVisKey); err != nil {
		return err
	}
	if err := qb.msgs.Put(seq, rec.encode()); err != nil {
		return err
	}
	return qb.vis.Put(visKey(rec.visibleAt, seq), nil)
}

func (qb queueBuckets) remove(seq, visKey []byte) error {
	if err := qb.vis.Delete(visKey); err != nil {
		return err
	}
	return qb.msgs.Delete(seq)
}

// visible returns up to n visibility keys due at now, oldest first, and when the next one not
// yet due becomes visible (0 if none is waiting).
func (qb queueBuckets) visible(now int64, n int) (keys [][]byte, nextAt int64) {
	c := qb.vis.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		at := int64(binary.BigEndian.Uint64(k[:8]))
		if at > now {
			return keys, at
		}
		if len(keys) == n {
			break
		}
		keys = append(keys, bytes.Clone(k))
	}
	return keys, 0
}

// record is a stored message, laid out as a format byte, then uvarint-prefixed strings and
// varint numbers; version 1.
type record struct {
	id           string
	body         []byte
	attrs        map[string]string
	sentAt       int64
	visibleAt    int64
	receiveCount uint64
}

func (r record) encode() []byte {
	b := make([]byte, 0, 32+len(r.id)+len(r.body))
	b = append(b, 1)
	b = appendBytes(b, []byte(r.id))
	b = appendBytes(b, r.body)
	b = binary.AppendUvarint(b, uint64(len(r.attrs)))
	names := make([]string, 0, len(r.attrs))
	for k := range r.attrs {
		names = append(names, k)
	}
	sort.Strings(names) // a stable encoding keeps records comparable in tests
	for _, k := range names {
		b = appendBytes(b, []byte(k))
		b = appendBytes(b, []byte(r.attrs[k]))
	}
	b = binary.AppendVarint(b, r.sentAt)
	b = binary.AppendVarint(b, r.visibleAt)
	return binary.AppendUvarint(b, r.receiveCount)
}

func appendBytes(b, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decodeRecord reads a record written by encode. It copies what it keeps: bbolt's values are
// only valid inside their transaction.
func decodeRecord(b []byte) (record, error) {
	if len(b) == 0 || b[0] != 1 {
		return record{}, errCorrupt
	}
	d := decoder{b: b[1:]}
	r := record{id: string(d.bytes()), body: bytes.Clone(d.bytes())}
	n := d.uvarint()
	if n > queue.MaxAttributes {
		return record{}, errCorrupt
	}
	if n > 0 {
		r.attrs = make(map[string]string, n)
		for range n {
			k := string(d.bytes())
			r.attrs[k] = string(d.bytes())
		}
	}
	r.sentAt = d.varint()
	r.visibleAt = d.varint()
	r.receiveCount = d.uvarint()
	if d.bad || len(d.b) != 0 {
		return record{}, errCorrupt
	}
	return r, nil
}

type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.bad || n > uint64(len(d.b)) {
		d.bad = true
		return nil
	}
	s := d.b[:n]
	d.b = d.b[n:]
	return s
}

// receipt names one receive of one message: the queue's tag (so a receipt of another queue is
// refused), the message's sequence number and the receive count it was issued at (so a receipt
// from an earlier receive is stale).
type receipt struct {
	tag   uint32
	seq   uint64
	count uint64
}

func (r receipt) String() string {
	b := make([]byte, 0, 24)
	b = append(b, 1)
	b = binary.BigEndian.AppendUint32(b, r.tag)
	b = binary.AppendUvarint(b, r.seq)
	b = binary.AppendUvarint(b, r.count)
	return base64.RawURLEncoding.EncodeToString(b)
}

// parseReceipt reads a receipt handle, which comes from outside (a consumer, an operator).
func parseReceipt(s string) (receipt, error) {
	bad := fmt.Errorf("%w: malformed", queue.ErrReceiptInvalid)
	if len(s) == 0 || len(s) > 64 {
		return receipt{}, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 5 || b[0] != 1 {
		return receipt{}, bad
	}
	d := decoder{b: b[5:]}
	r := receipt{tag: binary.BigEndian.Uint32(b[1:5]), seq: d.uvarint(), count: d.uvarint()}
	if d.bad || len(d.b) != 0 || r.count == 0 {
		return receipt{}, bad
	}
	return r, nil
}
