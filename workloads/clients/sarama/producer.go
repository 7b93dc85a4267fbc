// Producer driver for sarama (Go), built from Debian's packages (build.sh). It speaks the
// JSON-lines contract of workloads/clients/process.py: one op per stdin line, one event per
// stdout line, diagnostics (and sarama's own log) on stderr.
//
// The producer is idempotent with acks=all and otherwise keeps sarama's own defaults, so the
// benchmark measures what a user of the library gets. Known traits of sarama 1.22.1 that show in
// the results (not worked around here, on purpose): a batch answered with a retriable error is
// re-sent at once, without Producer.Retry.Backoff; once messages of a partition have failed for
// good, it keeps numbering the next ones after them, so the broker answers every later batch of
// that partition OUT_OF_ORDER_SEQUENCE_NUMBER until the producer is restarted; and when a retried
// batch runs out of retries only its first message is failed, the others are never answered (the
// driver's message_timeout_ms reports them).
package main

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

// Set by build.sh from the Debian package (-ldflags -X); sarama 1.22 has no version constant.
var saramaVersion = "unknown"

const connectTimeout = 30 * time.Second
const closeTimeout = 10 * time.Second

// ---------------------------------------------------------------------------------------------
// Output: one goroutine owns stdout so lines never interleave; it flushes whenever it is idle.

type readyEvent struct {
	Event    string         `json:"event"`
	Library  string         `json:"library"`
	Version  string         `json:"version"`
	Settings map[string]any `json:"settings"`
}

type ackEvent struct {
	Event     string  `json:"event"`
	ID        uint64  `json:"id"`
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	TS        float64 `json:"ts"`
}

type errorEvent struct {
	Event     string  `json:"event"`
	ID        uint64  `json:"id"`
	Partition int32   `json:"partition"`
	Error     string  `json:"error"`
	Written   *bool   `json:"written"` // false: certainly not written; null: unknown
	TS        float64 `json:"ts"`
}

type statsEvent struct {
	Event   string           `json:"event"`
	Retries int64            `json:"retries"`
	Errors  map[string]int64 `json:"errors"`
}

type flushedEvent struct {
	Event       string `json:"event"`
	Outstanding int    `json:"outstanding"`
}

type fatalEvent struct {
	Event string `json:"event"`
	Error string `json:"error"`
}

type syncReq chan struct{} // asks the writer to flush and answer

var out = make(chan any, 8192)

func writer() {
	w := bufio.NewWriterSize(os.Stdout, 1<<16)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // keep "<", ">" and "&" readable in error texts
	for ev := range out {
		if done, ok := ev.(syncReq); ok {
			w.Flush()
			close(done)
			continue
		}
		if err := enc.Encode(ev); err != nil {
			fmt.Fprintln(os.Stderr, "sarama-driver: cannot write stdout:", err)
			os.Exit(1)
		}
		if len(out) == 0 {
			w.Flush()
		}
	}
}

// exit flushes what was printed so far and exits (other goroutines' later lines are dropped).
func exit(code int) {
	done := make(syncReq)
	out <- done
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
	os.Exit(code)
}

func fatal(code int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintln(os.Stderr, "sarama-driver: fatal:", msg)
	out <- fatalEvent{"fatal", strings.ReplaceAll(msg, "\n", " ")}
	exit(code)
}

func now() float64 { return float64(time.Now().UnixNano()) / 1e9 }

var (
	falseVal   = false
	notWritten = &falseVal
)

// ---------------------------------------------------------------------------------------------
// Outstanding sends. Each send is answered exactly once (ack, error, timeout or purge):
// whoever marks it done first reports it; a late answer from sarama is only logged.

type pending struct {
	id        uint64
	partition int32
	deadline  time.Time
	msg       *sarama.ProducerMessage
	handed    bool // given to sarama's Input (else it certainly never reached a broker)
	done      bool
}

type tracker struct {
	mu          sync.Mutex
	queue       []*pending // send order = deadline order (one timeout for all)
	outstanding int
	accepting   bool
	activity    int64 // sends + answers, to print stats only while something happens
}

var tr = tracker{accepting: true}

// finish answers p with ev unless it already was answered (then false). The line is queued
// under the lock, so a flush that sees nothing outstanding prints "flushed" after every answer.
func (t *tracker) finish(p *pending, ev any) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p.done {
		return false
	}
	p.done = true
	t.outstanding--
	t.activity++
	out <- ev
	return true
}

// expire answers every unanswered send whose deadline passed (all of them when all=true) with
// reason, oldest first, and returns how many it answered.
func (t *tracker) expire(all bool, reason string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	cut := time.Now()
	n, i := 0, 0
	for ; i < len(t.queue); i++ {
		p := t.queue[i]
		if p.done {
			continue
		}
		if !all && cut.Before(p.deadline) {
			break
		}
		p.done = true
		t.outstanding--
		n++
		var written *bool // handed to sarama: it may have been written
		if !p.handed {
			written = notWritten
		}
		out <- errorEvent{"error", p.id, p.partition, reason, written, now()}
	}
	t.queue = t.queue[i:]
	t.activity += int64(n)
	return n
}

// ---------------------------------------------------------------------------------------------
// Retries and produce errors, counted on the wire.
//
// sarama 1.22 has no retry callback and no retry metric (its go-metrics registry counts records
// and requests, not re-sends), and its log says "retrying" also for the last attempt that it then
// gives up on. So the driver taps its broker connections (Net.Proxy.Dialer: a plain TCP dial,
// as sarama's own) and reads what really crosses them:
//   - retries: produce record batches sent again, i.e. a batch whose idempotent sequence range
//     starts below what was already written for that partition (one per re-sent batch, as
//     librdkafka counts request retries). A request whose write failed is not counted as sent.
//     An attempt that never reaches a broker (a dial to a dead leader) is not a retry on the
//     wire; it shows up as NETWORK_EXCEPTION below.
//   - errors: every partition error code in produce responses (retriable or not, including
//     DUPLICATE_SEQUENCE_NUMBER that sarama takes as success), by Kafka's name; plus
//     NETWORK_EXCEPTION for each produce request sarama lost on its connection or could not
//     send (its log line "state change to [closing] because ..."), which it retries as a whole.

type stats struct {
	mu      sync.Mutex
	retries int64
	errs    map[string]int64
	seqs    map[string]seqState // "topic/partition" -> next sequence after what was sent
}

type seqState struct {
	pid   int64
	epoch int16
	next  int32
}

var st = stats{errs: map[string]int64{}, seqs: map[string]seqState{}}

// printStats prints the cumulative counts (each second while active, and before flushed / exit).
func printStats() {
	st.mu.Lock()
	ev := statsEvent{"stats", st.retries, make(map[string]int64, len(st.errs))}
	for k, v := range st.errs {
		ev.Errors[k] = v
	}
	st.mu.Unlock()
	out <- ev
}

func (s *stats) addError(name string) {
	s.mu.Lock()
	s.errs[name]++
	s.mu.Unlock()
}

type tapDialer struct{ d net.Dialer }

func (td *tapDialer) Dial(network, addr string) (net.Conn, error) {
	c, err := td.d.Dial(network, addr)
	if err != nil {
		return nil, err
	}
	return &tapConn{Conn: c, produce: map[int32]int16{}}, nil
}

type tapConn struct {
	net.Conn
	mu      sync.Mutex
	produce map[int32]int16 // correlation id -> version of produce requests awaiting a response
	// response framing (sarama reads through a bufio.Reader, so frames arrive in pieces)
	hdr     [8]byte
	hdrLen  int
	left    int
	collect bool
	version int16
	body    []byte
}

// Write: sarama writes each request with one Write call.
func (c *tapConn) Write(b []byte) (int, error) {
	isProduce := len(b) >= 12 && int16(binary.BigEndian.Uint16(b[4:])) == 0
	var corr int32
	if isProduce {
		corr = int32(binary.BigEndian.Uint32(b[8:]))
		c.mu.Lock()
		c.produce[corr] = int16(binary.BigEndian.Uint16(b[6:]))
		c.mu.Unlock()
	}
	n, err := c.Conn.Write(b)
	if isProduce {
		if err == nil && n == len(b) {
			countResends(b)
		} else {
			c.mu.Lock()
			delete(c.produce, corr)
			c.mu.Unlock()
		}
	}
	return n, err
}

func (c *tapConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.feed(b[:n])
	return n, err
}

func (c *tapConn) feed(data []byte) {
	for len(data) > 0 {
		if c.hdrLen < 8 { // size + correlation id
			k := copy(c.hdr[c.hdrLen:], data)
			c.hdrLen += k
			data = data[k:]
			if c.hdrLen < 8 {
				return
			}
			c.left = int(int32(binary.BigEndian.Uint32(c.hdr[0:]))) - 4
			corr := int32(binary.BigEndian.Uint32(c.hdr[4:]))
			c.mu.Lock()
			c.version, c.collect = c.produce[corr]
			delete(c.produce, corr)
			c.mu.Unlock()
			c.body = c.body[:0]
		}
		k := c.left
		if k > len(data) {
			k = len(data)
		}
		if c.collect {
			c.body = append(c.body, data[:k]...)
		}
		c.left -= k
		data = data[k:]
		if c.left <= 0 {
			if c.collect {
				countResponseErrors(c.body, c.version)
			}
			c.hdrLen = 0
		}
	}
}

// reader over a Kafka message; a short read sets bad and returns zeros.
type rd struct {
	b   []byte
	bad bool
}

func (r *rd) take(n int) []byte {
	if n < 0 || n > len(r.b) {
		r.bad = true
		r.b = nil
		return make([]byte, max(n, 0))
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}
func (r *rd) i16() int16 { return int16(binary.BigEndian.Uint16(r.take(2))) }
func (r *rd) i32() int32 { return int32(binary.BigEndian.Uint32(r.take(4))) }
func (r *rd) str() string {
	n := int(r.i16())
	if n < 0 {
		return ""
	}
	return string(r.take(n))
}

func max(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// countResends reads a produce request (v3-v8: record batches v2) as written.
func countResends(req []byte) {
	r := &rd{b: req[4:]}
	r.i16() // api key
	if v := r.i16(); v < 3 || v > 8 {
		return
	}
	r.i32()       // correlation id
	r.str()       // client id
	r.str()       // transactional id
	r.take(2 + 4) // acks, timeout
	st.mu.Lock()
	defer st.mu.Unlock()
	for nt := r.i32(); nt > 0 && !r.bad; nt-- {
		topic := r.str()
		for np := r.i32(); np > 0 && !r.bad; np-- {
			part := r.i32()
			recs := &rd{b: r.take(int(r.i32()))}
			for len(recs.b) >= 61 && !recs.bad {
				h := recs.b
				batch := recs.take(12 + int(int32(binary.BigEndian.Uint32(h[8:]))))
				if recs.bad || h[16] != 2 {
					break
				}
				lastDelta := int32(binary.BigEndian.Uint32(batch[23:]))
				pid := int64(binary.BigEndian.Uint64(batch[43:]))
				epoch := int16(binary.BigEndian.Uint16(batch[51:]))
				seq := int32(binary.BigEndian.Uint32(batch[53:]))
				if pid < 0 || seq < 0 {
					continue // not idempotent: nothing to compare
				}
				key := topic + "/" + strconv.Itoa(int(part))
				s, seen := st.seqs[key]
				if seen && s.pid == pid && s.epoch == epoch && seq < s.next {
					st.retries++
				}
				if !seen || s.pid != pid || s.epoch != epoch || seq+lastDelta+1 > s.next {
					st.seqs[key] = seqState{pid, epoch, seq + lastDelta + 1}
				}
			}
		}
	}
}

// countResponseErrors reads a produce response body (after the correlation id), v3-v4.
func countResponseErrors(body []byte, version int16) {
	if version < 3 || version > 4 { // sarama 1.22 sends v3 only; later layouts differ
		return
	}
	r := &rd{b: body}
	for nt := r.i32(); nt > 0 && !r.bad; nt-- {
		r.str()
		for np := r.i32(); np > 0 && !r.bad; np-- {
			r.i32() // partition
			code := r.i16()
			r.take(8 + 8) // base offset, log append time
			if code != 0 && !r.bad {
				st.addError(kafkaName(sarama.KError(code)))
			}
		}
	}
}

// saramaLog passes sarama's log to stderr and counts the produce requests it lost on a
// connection (handled as a whole by sarama's retry path).
type saramaLog struct{}

func (saramaLog) Print(v ...any)                 { logLine(fmt.Sprint(v...)) }
func (saramaLog) Printf(format string, v ...any) { logLine(fmt.Sprintf(format, v...)) }
func (saramaLog) Println(v ...any)               { logLine(fmt.Sprintln(v...)) }

func logLine(s string) {
	s = strings.TrimRight(s, "\n")
	fmt.Fprintln(os.Stderr, "[sarama]", s)
	if strings.Contains(s, "state change to [closing] because") {
		st.addError("NETWORK_EXCEPTION")
	}
}

// ---------------------------------------------------------------------------------------------
// Error names: Kafka's protocol names for broker codes, stable names for sarama's own errors.

var kafkaNames = map[sarama.KError]string{
	-1: "UNKNOWN_SERVER_ERROR", 1: "OFFSET_OUT_OF_RANGE", 2: "CORRUPT_MESSAGE",
	3: "UNKNOWN_TOPIC_OR_PARTITION", 4: "INVALID_FETCH_SIZE", 5: "LEADER_NOT_AVAILABLE",
	6: "NOT_LEADER_FOR_PARTITION", 7: "REQUEST_TIMED_OUT", 8: "BROKER_NOT_AVAILABLE",
	9: "REPLICA_NOT_AVAILABLE", 10: "MESSAGE_TOO_LARGE", 13: "NETWORK_EXCEPTION",
	17: "INVALID_TOPIC_EXCEPTION", 18: "RECORD_LIST_TOO_LARGE", 19: "NOT_ENOUGH_REPLICAS",
	20: "NOT_ENOUGH_REPLICAS_AFTER_APPEND", 21: "INVALID_REQUIRED_ACKS",
	29: "TOPIC_AUTHORIZATION_FAILED", 31: "CLUSTER_AUTHORIZATION_FAILED", 32: "INVALID_TIMESTAMP",
	35: "UNSUPPORTED_VERSION", 42: "INVALID_REQUEST", 43: "UNSUPPORTED_FOR_MESSAGE_FORMAT",
	44: "POLICY_VIOLATION", 45: "OUT_OF_ORDER_SEQUENCE_NUMBER", 46: "DUPLICATE_SEQUENCE_NUMBER",
	47: "INVALID_PRODUCER_EPOCH", 49: "INVALID_PRODUCER_ID_MAPPING", 56: "KAFKA_STORAGE_ERROR",
	59: "UNKNOWN_PRODUCER_ID", 74: "FENCED_LEADER_EPOCH", 75: "UNKNOWN_LEADER_EPOCH",
	76: "UNSUPPORTED_COMPRESSION_TYPE", 87: "INVALID_RECORD",
}

func kafkaName(k sarama.KError) string {
	if n, ok := kafkaNames[k]; ok {
		return n
	}
	return "KAFKA_ERROR_" + strconv.Itoa(int(k))
}

// Broker codes that reject a record for good (it was not appended).
var rejected = map[sarama.KError]bool{10: true, 18: true, 21: true, 29: true, 87: true}

// describe names err and says whether the message certainly was not written (conservative:
// anything that may have reached a broker's log is "unknown").
func describe(err error) (string, *bool) {
	var k sarama.KError
	if errors.As(err, &k) {
		if rejected[k] {
			return kafkaName(k) + ": " + k.Error(), notWritten
		}
		return kafkaName(k) + ": " + k.Error(), nil
	}
	var name string
	var written *bool
	var ne net.Error
	switch e := err; {
	case errors.Is(e, sarama.ErrShuttingDown):
		name, written = "SHUTTING_DOWN", notWritten
	case errors.Is(e, sarama.ErrInvalidPartition):
		name, written = "INVALID_PARTITION", notWritten
	case errors.Is(e, sarama.ErrClosedClient):
		name = "CLOSED_CLIENT"
	case errors.Is(e, sarama.ErrOutOfBrokers):
		name = "OUT_OF_BROKERS" // may follow an attempt that reached a broker
	case errors.Is(e, sarama.ErrIncompleteResponse):
		name = "INCOMPLETE_RESPONSE"
	case errors.Is(e, sarama.ErrNotConnected):
		name = "NOT_CONNECTED"
	case e.Error() == "circuit breaker is open": // eapache/go-resiliency, not imported here
		name = "BREAKER_OPEN"
	case errors.As(e, new(sarama.ConfigurationError)):
		name, written = "CONFIGURATION_ERROR", notWritten
	case errors.As(e, new(sarama.PacketEncodingError)):
		name, written = "ENCODING_ERROR", notWritten
	case errors.As(e, new(sarama.PacketDecodingError)):
		name = "DECODING_ERROR"
	case errors.As(e, &ne) && ne.Timeout():
		name = "NETWORK_TIMEOUT"
	default:
		name = "NETWORK_EXCEPTION" // connection errors (EOF, reset, refused) after retries
	}
	return name + ": " + err.Error(), written
}

// ---------------------------------------------------------------------------------------------
// Configuration

type op struct {
	Op        string         `json:"op"`
	Bootstrap string         `json:"bootstrap"`
	ClientID  string         `json:"client_id"`
	LingerMs  *float64       `json:"linger_ms"`
	TimeoutMs float64        `json:"message_timeout_ms"`
	BodyB64   string         `json:"body_b64"`
	Stamp     *int           `json:"stamp"`
	Settings  map[string]any `json:"settings"`
	ID        uint64         `json:"id"`
	Topic     string         `json:"topic"`
	Partition int32          `json:"partition"`
	Producer  string         `json:"producer"`
	FlushMs   *float64       `json:"timeout_ms"`
}

// setting: a sarama field settable by name from "settings"; durations are given in ms.
type setting struct {
	i *int
	d *time.Duration
}

func settingsOf(c *sarama.Config) map[string]setting {
	return map[string]setting{
		"Producer.Retry.Max":         {i: &c.Producer.Retry.Max},
		"Producer.Retry.Backoff":     {d: &c.Producer.Retry.Backoff},
		"Producer.Timeout":           {d: &c.Producer.Timeout},
		"Producer.Flush.Messages":    {i: &c.Producer.Flush.Messages},
		"Producer.Flush.Bytes":       {i: &c.Producer.Flush.Bytes},
		"Producer.Flush.MaxMessages": {i: &c.Producer.Flush.MaxMessages},
		"Producer.MaxMessageBytes":   {i: &c.Producer.MaxMessageBytes},
		"Metadata.Retry.Max":         {i: &c.Metadata.Retry.Max},
		"Metadata.Retry.Backoff":     {d: &c.Metadata.Retry.Backoff},
		"Metadata.RefreshFrequency":  {d: &c.Metadata.RefreshFrequency},
		"Net.DialTimeout":            {d: &c.Net.DialTimeout},
		"Net.ReadTimeout":            {d: &c.Net.ReadTimeout},
		"Net.WriteTimeout":           {d: &c.Net.WriteTimeout},
		"ChannelBufferSize":          {i: &c.ChannelBufferSize},
	}
}

type driverConf struct {
	brokers   []string
	timeout   time.Duration
	body      []byte
	stamp     int
	config    *sarama.Config
	effective map[string]any
}

func buildConfig(o *op) (*driverConf, error) {
	d := &driverConf{}
	for _, b := range strings.Split(o.Bootstrap, ",") {
		if b = strings.TrimSpace(b); b != "" {
			d.brokers = append(d.brokers, b)
		}
	}
	if len(d.brokers) == 0 {
		return nil, errors.New("config: bootstrap names no broker")
	}
	if o.TimeoutMs <= 0 {
		return nil, errors.New("config: message_timeout_ms must be > 0")
	}
	d.timeout = time.Duration(o.TimeoutMs * float64(time.Millisecond))
	var err error
	if d.body, err = base64.StdEncoding.DecodeString(o.BodyB64); err != nil {
		return nil, fmt.Errorf("config: body_b64 is not base64: %v", err)
	}
	d.stamp = 8
	if o.Stamp != nil {
		d.stamp = *o.Stamp
	}
	if d.stamp < 0 || d.stamp > 8 {
		return nil, fmt.Errorf("config: stamp must be 0..8 bytes, got %d", d.stamp)
	}

	c := sarama.NewConfig() // sarama's own defaults, then only what the benchmark requires
	c.ClientID = o.ClientID
	c.Version = sarama.V2_1_0_0 // record batches v2 + idempotence need >= 0.11
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Net.MaxOpenRequests = 1 // sarama refuses idempotence otherwise
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.Partitioner = sarama.NewManualPartitioner // each send names its partition
	if o.LingerMs != nil {
		c.Producer.Flush.Frequency = time.Duration(*o.LingerMs * float64(time.Millisecond))
	}

	known := settingsOf(c)
	keys := make([]string, 0, len(o.Settings))
	for k := range o.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s, ok := known[k]
		if !ok {
			names := make([]string, 0, len(known))
			for n := range known {
				names = append(names, n)
			}
			sort.Strings(names)
			return nil, fmt.Errorf("config: unknown sarama setting %q (known: %s)", k, strings.Join(names, ", "))
		}
		v, ok := o.Settings[k].(float64)
		if !ok || v != math.Trunc(v) {
			return nil, fmt.Errorf("config: setting %q must be a whole number (durations in ms), got %v", k, o.Settings[k])
		}
		if s.i != nil {
			*s.i = int(v)
		} else {
			*s.d = time.Duration(v) * time.Millisecond
		}
	}
	// The tap dialer (retry counting) dials exactly as sarama would without a proxy.
	c.Net.Proxy.Enable = true
	c.Net.Proxy.Dialer = &tapDialer{net.Dialer{Timeout: c.Net.DialTimeout, KeepAlive: c.Net.KeepAlive}}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("config: sarama rejects it: %v", err)
	}

	eff := map[string]any{
		"Version": c.Version.String(), "ClientID": c.ClientID,
		"Producer.Idempotent": c.Producer.Idempotent, "Producer.RequiredAcks": "WaitForAll",
		"Net.MaxOpenRequests": c.Net.MaxOpenRequests, "Producer.Return.Successes": true,
		"Producer.Partitioner": "manual", "Producer.Compression": c.Producer.Compression.String(),
		"Producer.Flush.Frequency": c.Producer.Flush.Frequency.Milliseconds(),
		"Metadata.Full":            c.Metadata.Full, "message_timeout_ms": d.timeout.Milliseconds(),
	}
	for k, s := range known {
		if s.i != nil {
			eff[k] = *s.i
		} else {
			eff[k] = s.d.Milliseconds()
		}
	}
	d.config, d.effective = c, eff
	return d, nil
}

// connect opens the client (which fetches metadata), checks it knows a broker, and asks for a
// producer id (NewAsyncProducerFromClient does InitProducerId), all within connectTimeout.
func connect(d *driverConf) (sarama.Client, sarama.AsyncProducer, error) {
	type result struct {
		c   sarama.Client
		p   sarama.AsyncProducer
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := sarama.NewClient(d.brokers, d.config)
		if err != nil {
			done <- result{err: err}
			return
		}
		if err = c.RefreshMetadata(); err == nil && len(c.Brokers()) == 0 {
			err = errors.New("metadata lists no broker")
		}
		if err != nil {
			c.Close()
			done <- result{err: err}
			return
		}
		p, err := sarama.NewAsyncProducerFromClient(c)
		if err != nil {
			c.Close()
			done <- result{err: fmt.Errorf("no producer id (InitProducerId): %v", err)}
			return
		}
		done <- result{c, p, nil}
	}()
	select {
	case r := <-done:
		return r.c, r.p, r.err
	case <-time.After(connectTimeout):
		return nil, nil, fmt.Errorf("no answer within %s", connectTimeout)
	}
}

// ---------------------------------------------------------------------------------------------

func main() {
	go writer()
	sarama.Logger = saramaLog{}

	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	next := func() (*op, bool) {
		for in.Scan() {
			line := in.Bytes()
			if len(strings.TrimSpace(string(line))) == 0 {
				continue
			}
			o := &op{}
			if err := json.Unmarshal(line, o); err != nil {
				fatal(2, "malformed input line (%v): %.200s", err, line)
			}
			return o, true
		}
		if err := in.Err(); err != nil {
			fatal(2, "cannot read stdin: %v", err)
		}
		return nil, false
	}

	first, ok := next()
	if !ok {
		os.Exit(0)
	}
	if first.Op != "config" {
		fatal(2, "the first line must be op=config, got op=%q", first.Op)
	}
	d, err := buildConfig(first)
	if err != nil {
		fatal(1, "%v", err)
	}
	client, producer, err := connect(d)
	if err != nil {
		fatal(1, "cannot connect to %s: %v", strings.Join(d.brokers, ","), err)
	}
	out <- readyEvent{"ready", "sarama", saramaVersion, d.effective}

	// Answers from sarama (both channels must be read or it deadlocks).
	answered := make(chan struct{})
	go func() {
		succ, errs := producer.Successes(), producer.Errors()
		for succ != nil || errs != nil {
			select {
			case m, ok := <-succ:
				if !ok {
					succ = nil
					continue
				}
				p := m.Metadata.(*pending)
				if !tr.finish(p, ackEvent{"ack", p.id, m.Partition, m.Offset, now()}) {
					fmt.Fprintf(os.Stderr, "sarama-driver: id %d acked at offset %d after it was reported unanswered\n", p.id, m.Offset)
				}
			case e, ok := <-errs:
				if !ok {
					errs = nil
					continue
				}
				p := e.Msg.Metadata.(*pending)
				name, written := describe(e.Err)
				if !tr.finish(p, errorEvent{"error", p.id, p.partition, name, written, now()}) {
					fmt.Fprintf(os.Stderr, "sarama-driver: id %d failed (%s) after it was reported unanswered\n", p.id, name)
				}
			}
		}
		close(answered)
	}()

	// Feeder: sarama's Input blocks while it is busy (e.g. retrying); the queue keeps stdin,
	// flush and deadlines moving meanwhile.
	sendq := make(chan *pending, 1<<16)
	fed := make(chan struct{})
	go func() {
		for p := range sendq {
			tr.mu.Lock()
			skip := p.done
			p.handed = !skip
			tr.mu.Unlock()
			if !skip {
				producer.Input() <- p.msg
			}
		}
		close(fed)
	}()

	// Deadlines (sarama has no per-message timeout) and stats once a second while active.
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		lastActivity, lastStats := int64(-1), time.Now()
		for range tick.C {
			tr.expire(false, "MESSAGE_TIMED_OUT: not acknowledged within message_timeout_ms")
			if time.Since(lastStats) < time.Second {
				continue
			}
			lastStats = time.Now()
			tr.mu.Lock()
			a := tr.activity
			tr.mu.Unlock()
			if a == lastActivity {
				continue
			}
			lastActivity = a
			printStats()
		}
	}()

	for {
		o, ok := next()
		if !ok || o.Op == "close" {
			break
		}
		switch o.Op {
		case "send":
			p := &pending{id: o.ID, partition: o.Partition}
			tr.mu.Lock()
			accepting := tr.accepting
			tr.mu.Unlock()
			if !accepting {
				out <- errorEvent{"error", o.ID, o.Partition, "CLOSED: send after flush", notWritten, now()}
				continue
			}
			var id [8]byte
			binary.BigEndian.PutUint64(id[:], o.ID)
			value := make([]byte, 0, d.stamp+len(d.body))
			value = append(append(value, id[8-d.stamp:]...), d.body...)
			idText := strconv.FormatUint(o.ID, 10)
			p.msg = &sarama.ProducerMessage{
				Topic: o.Topic, Partition: o.Partition, Value: sarama.ByteEncoder(value),
				Headers: []sarama.RecordHeader{
					{Key: []byte("id"), Value: []byte(idText)},
					{Key: []byte("p"), Value: []byte(o.Producer)},
				},
				Metadata: p,
			}
			p.deadline = time.Now().Add(d.timeout)
			tr.mu.Lock()
			tr.queue = append(tr.queue, p)
			tr.outstanding++
			tr.activity++
			tr.mu.Unlock()
			sendq <- p
		case "flush":
			wait := 20 * time.Second
			if o.FlushMs != nil {
				wait = time.Duration(*o.FlushMs * float64(time.Millisecond))
			}
			tr.mu.Lock()
			tr.accepting = false
			tr.mu.Unlock()
			end := time.Now().Add(wait)
			for time.Now().Before(end) {
				tr.mu.Lock()
				n := tr.outstanding
				tr.mu.Unlock()
				if n == 0 {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			n := tr.expire(true, "PURGED: not answered within the drain")
			printStats()
			out <- flushedEvent{"flushed", n}
		default:
			fatal(2, "unknown op %q", o.Op)
		}
	}

	// Close: hand over what is queued, let sarama deliver it and shut down, within closeTimeout.
	closed := make(chan struct{})
	go func() {
		close(sendq)
		<-fed
		producer.AsyncClose()
		<-answered
		client.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(closeTimeout):
		fmt.Fprintln(os.Stderr, "sarama-driver: producer did not close within", closeTimeout)
	}
	tr.expire(true, "PURGED: not answered before close")
	printStats()
	exit(0)
}
