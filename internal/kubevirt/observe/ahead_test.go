package observe

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// pageServer serves a list of VMIs in pages as the API server does, with
// what a test needs to change about it.
type pageServer struct {
	items int
	// metaLast writes a page's metadata after its items, as the server
	// writes a custom resource's list; otherwise before them.
	metaLast bool
	// delay is added to every page's answer.
	delay time.Duration
	// fail, when set, answers the page of that index (from 0) with
	// status and body instead.
	fail       int
	failStatus int
	failBody   string
	// failTimes, when set, answers so only the first failTimes times.
	failTimes int32
	failed    atomic.Int32
	// bad, when set, is the index of a page whose items do not decode.
	bad int
	// hold, when set, is the index of a page answered only once its
	// request is cancelled.
	hold int

	asked atomic.Int32 // pages asked for
	busy  atomic.Int32 // requests being answered
	most  atomic.Int32 // the most answered at once
	ahead atomic.Int32 // the most pages asked for beyond the told ones
	told  atomic.Int32 // pages told (set by the test's page func)
}

func (s *pageServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.busy.Add(1)
	defer s.busy.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	idx := int(s.asked.Add(1)) - 1
	if d := idx - int(s.told.Load()); int32(d) > s.ahead.Load() {
		s.ahead.Store(int32(d))
	}
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	from := 0
	if c := r.URL.Query().Get("continue"); c != "" {
		b, err := base64.StdEncoding.DecodeString(c)
		if err != nil {
			http.Error(w, "bad continue", http.StatusBadRequest)
			return
		}
		from, _ = strconv.Atoi(strings.TrimPrefix(string(b), "offset="))
	}
	if limit <= 0 {
		limit = s.items
	}
	pageIdx := from / max(limit, 1)
	if s.hold >= 0 && pageIdx == s.hold {
		<-r.Context().Done()
		return
	}
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	if s.fail >= 0 && pageIdx == s.fail && (s.failTimes == 0 || s.failed.Add(1) <= s.failTimes) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(s.failStatus)
		fmt.Fprint(w, s.failBody)
		return
	}
	to := min(from+limit, s.items)
	var items strings.Builder
	for i := from; i < to; i++ {
		if i > from {
			items.WriteByte(',')
		}
		// A label that looks like a list's metadata, to mislead a reader
		// that would search the bytes.
		meta := fmt.Sprintf(`{"name":"vmi-%d","namespace":"ns","labels":{"continue":"no"}}`, i)
		if s.bad >= 0 && pageIdx == s.bad {
			meta = `5`
		}
		fmt.Fprintf(&items, `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":%s,"status":{"phase":"Running","metadata":{"continue":"not this"}}}`, meta)
	}
	cont := ""
	if to < s.items {
		cont = base64.StdEncoding.EncodeToString([]byte("offset=" + strconv.Itoa(to)))
	}
	meta := fmt.Sprintf(`{"resourceVersion":"7","continue":%q,"remainingItemCount":%d}`, cont, s.items-to)
	if cont == "" {
		meta = `{"resourceVersion":"7"}`
	}
	w.Header().Set("Content-Type", "application/json")
	if s.metaLast {
		fmt.Fprintf(w, `{"apiVersion":"kubevirt.io/v1","items":[%s],"kind":"VirtualMachineInstanceList","metadata":%s}`, items.String(), meta)
	} else {
		fmt.Fprintf(w, `{"kind":"VirtualMachineInstanceList","apiVersion":"kubevirt.io/v1","metadata":%s,"items":[%s]}`, meta, items.String())
	}
}

func newPageServer(items int) *pageServer {
	return &pageServer{items: items, fail: -1, bad: -1, hold: -1}
}

// start serves s until the test ends and returns a page reader of it.
func (s *pageServer) start(t *testing.T) *PageReader {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	p, err := NewPageReader(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// listed is one read of the VMIs: what was told and returned.
type listed struct {
	names []string
	told  []int
	err   error
}

// readVMIs reads every VMI of p in pages of limit with read (leanList or
// the reference below), telling s of each page; then tells during, when
// set, after each page.
func readVMIs(ctx context.Context, p *PageReader, s *pageServer, limit int64, during func(told int),
	read vmiReader) listed {
	var l listed
	vmis, err := read(ctx, p, vmiResource, "VirtualMachineInstance", "", limit, (*vmiWire).object, nil, func(n int) {
		l.told = append(l.told, n)
		s.told.Add(1)
		if during != nil {
			during(len(l.told))
		}
	})
	for _, v := range vmis {
		l.names = append(l.names, v.Name)
	}
	l.err = err
	return l
}

// vmiReader reads a list of VMIs: leanList or inTurn.
type vmiReader = func(context.Context, *PageReader, schema.GroupVersionResource, string, string, int64,
	func(*vmiWire) snapshot.VMI, func(), func(int)) ([]snapshot.VMI, error)

var (
	ahead vmiReader = leanList[vmiWire, snapshot.VMI]
	turn  vmiReader = inTurn[vmiWire, snapshot.VMI]
)

// inTurn is the page reader's loop as it was before it read ahead: each
// page asked for once the one before it is decoded. Its results are the
// reference the reading ahead must give.
func inTurn[W any, T any](ctx context.Context, p *PageReader, gvr schema.GroupVersionResource, kind, ns string, limit int64,
	object func(*W) T, answered func(), page func(n int)) ([]T, error) {
	var out []T
	var pg wirePage[W]
	cont := ""
	for {
		buf, err := p.page(ctx, gvr, kind, ns, limit, cont, nil)
		if err != nil {
			return nil, err
		}
		err = pg.decode(buf.Bytes())
		bufs.Put(buf)
		if err != nil {
			return nil, fmt.Errorf("decoding a page of %s: %w", gvr.Resource, err)
		}
		for i := range pg.Items {
			out = append(out, object(&pg.Items[i]))
			snapshot.Lean(&out[len(out)-1])
		}
		page(len(out))
		if cont = pg.Metadata.Continue; cont == "" {
			return out, nil
		}
	}
}

// aheadGoroutines counts the goroutines fetching a page ahead.
func aheadGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "(*PageReader).fetchAhead")
}

// Reading ahead reads what reading in turn reads: every item once, in
// order, the same counts told after each page, whatever the page size and
// wherever the server writes a page's metadata; never more than one page
// ahead of the last one told, and one request at a time.
func TestLeanList_aheadReadsAsInTurn(t *testing.T) {
	for _, metaLast := range []bool{false, true} {
		for _, c := range []struct{ items, limit int }{{0, 3}, {1, 3}, {3, 3}, {10, 3}, {10, 1}, {10, 500}, {500, 7}} {
			name := fmt.Sprintf("metaLast=%v/items=%d/limit=%d", metaLast, c.items, c.limit)
			t.Run(name, func(t *testing.T) {
				s := newPageServer(c.items)
				s.metaLast = metaLast
				p := s.start(t)
				got := readVMIs(context.Background(), p, s, int64(c.limit), nil, ahead)
				if got.err != nil {
					t.Fatal(got.err)
				}
				if len(got.names) != c.items {
					t.Fatalf("read %d VMIs, want %d", len(got.names), c.items)
				}
				for i, n := range got.names {
					if want := fmt.Sprintf("vmi-%d", i); n != want {
						t.Fatalf("VMI %d is %s, want %s", i, n, want)
					}
				}
				pages := max(1, (c.items+c.limit-1)/c.limit)
				if int(s.asked.Load()) != pages || len(got.told) != pages {
					t.Errorf("asked for %d pages and told %d, want %d", s.asked.Load(), len(got.told), pages)
				}
				if a := s.ahead.Load(); a > 1 {
					t.Errorf("asked for a page %d ahead of the last told, want at most 1", a)
				}
				if m := s.most.Load(); m > 1 {
					t.Errorf("%d requests at once, want one at a time", m)
				}
				s2 := newPageServer(c.items)
				s2.metaLast = metaLast
				want := readVMIs(context.Background(), s2.start(t), s2, int64(c.limit), nil, turn)
				if fmt.Sprint(got.told) != fmt.Sprint(want.told) {
					t.Errorf("told %v, in turn %v", got.told, want.told)
				}
				if n := aheadGoroutines(); n != 0 {
					t.Errorf("%d pages still fetched ahead after the read", n)
				}
			})
		}
	}
}

// An error answering a page, a page that does not decode and a continue
// token the server no longer serves (410 Gone, Expired) end the read as
// they did when pages were read in turn: the same error, after the same
// pages were told; and the page fetched ahead is gone.
func TestLeanList_aheadErrorsAsInTurn(t *testing.T) {
	const status500 = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"etcdserver: request timed out","code":500}`
	for _, c := range []struct {
		name  string
		setup func(*pageServer)
		is    func(error) bool
	}{
		{"server error on the first page", func(s *pageServer) { s.fail, s.failStatus, s.failBody = 0, 500, status500 }, apierrors.IsInternalError},
		{"server error on page 3", func(s *pageServer) { s.fail, s.failStatus, s.failBody = 2, 500, status500 }, apierrors.IsInternalError},
		{"continue expired on page 2", func(s *pageServer) { s.fail, s.failStatus, s.failBody = 1, 410, expired }, apierrors.IsResourceExpired},
		{"no Status on page 4", func(s *pageServer) { s.fail, s.failStatus, s.failBody = 3, 502, "bad gateway" }, func(err error) bool {
			return strings.Contains(err.Error(), "bad gateway")
		}},
		{"page 2 does not decode", func(s *pageServer) { s.bad = 1 }, func(err error) bool {
			return strings.HasPrefix(err.Error(), "decoding a page of virtualmachineinstances: ")
		}},
		{"last page does not decode", func(s *pageServer) { s.bad = 3 }, func(err error) bool {
			return strings.HasPrefix(err.Error(), "decoding a page of virtualmachineinstances: ")
		}},
	} {
		for _, metaLast := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/metaLast=%v", c.name, metaLast), func(t *testing.T) {
				var res [2]listed
				for i, read := range []vmiReader{ahead, turn} {
					s := newPageServer(10)
					s.metaLast = metaLast
					c.setup(s)
					res[i] = readVMIs(context.Background(), s.start(t), s, 3, nil, read)
				}
				got, want := res[0], res[1]
				if got.err == nil || !c.is(got.err) {
					t.Fatalf("got error %v", got.err)
				}
				// The server's address differs between the two reads.
				if g, w := stripHost(got.err.Error()), stripHost(want.err.Error()); g != w {
					t.Errorf("error\n%s\nin turn\n%s", g, w)
				}
				if apierrors.IsResourceExpired(got.err) != apierrors.IsResourceExpired(want.err) || apierrors.IsInternalError(got.err) != apierrors.IsInternalError(want.err) {
					t.Errorf("the error's reason differs from in turn's: %v, %v", got.err, want.err)
				}
				if fmt.Sprint(got.told) != fmt.Sprint(want.told) {
					t.Errorf("told %v before the error, in turn %v", got.told, want.told)
				}
				if got.names != nil {
					t.Errorf("returned %d VMIs with the error", len(got.names))
				}
				if n := aheadGoroutines(); n != 0 {
					t.Errorf("%d pages still fetched ahead after the read", n)
				}
			})
		}
	}
}

// expired is the API server's answer to a continue token whose revision
// etcd has compacted (as TestObserve_readsAgainWhenTheServerExpiresAToken
// sees a real one answer).
const expired = `{"kind":"Status","apiVersion":"v1","metadata":{"continue":"inconsistent"},"status":"Failure","message":"The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.","reason":"Expired","code":410}`

// A continue token that expires during a read is answered 410 Expired; the
// read then starts again from the beginning, once, and says so: every VMI
// is read once, none from the list that expired. A token that expires
// again ends the read with an error that says what to do.
func TestReadAll_readsAgainWhenAContinueTokenExpires(t *testing.T) {
	for _, c := range []struct {
		name  string
		times int32
		fail  bool
	}{
		{"expires once", 1, false},
		{"expires every time", 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newPageServer(10)
			s.fail, s.failStatus, s.failBody, s.failTimes = 2, 410, expired, c.times
			var relisted []error
			var snap snapshot.Snapshot
			o := StorageRead{PageSize: 3, Pages: s.start(t), Kinds: snapshot.KindVMIs, Relisted: func(err error) { relisted = append(relisted, err) }}
			err := o.readAll(context.Background(), nil, &snap)
			if len(relisted) != 1 || !apierrors.IsResourceExpired(relisted[0]) {
				t.Errorf("told of %d reads again (%v), want one, for the expiry", len(relisted), relisted)
			}
			if c.fail {
				if !apierrors.IsResourceExpired(err) || !strings.Contains(err.Error(), "--chunk-size 0") || !strings.Contains(err.Error(), "read twice") {
					t.Fatalf("got error %v, want the expiry with what to do", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, v := range snap.VMIs {
				names = append(names, v.Name)
			}
			if want := "[vmi-0 vmi-1 vmi-2 vmi-3 vmi-4 vmi-5 vmi-6 vmi-7 vmi-8 vmi-9]"; fmt.Sprint(names) != want {
				t.Errorf("read %v, want %s", names, want)
			}
			// Pages 0 to 2 (2 expired), then 0 to 3 again.
			if n := s.asked.Load(); n != 7 {
				t.Errorf("asked for %d pages, want 7", n)
			}
		})
	}
}

func stripHost(s string) string {
	if i := strings.Index(s, "http://127.0.0.1:"); i >= 0 {
		j := strings.IndexByte(s[i+len("http://127.0.0.1:"):], '/')
		if j >= 0 {
			return s[:i] + s[i+len("http://127.0.0.1:")+j:]
		}
	}
	return s
}

// Cancelling the read while a page is fetched ahead ends it with the
// context's error, and no fetch outlives it: the server holds page 3 until
// its request is cancelled, and the read is cancelled once page 2 is told.
func TestLeanList_aheadStopsWhenCancelled(t *testing.T) {
	for _, metaLast := range []bool{false, true} {
		s := newPageServer(10)
		s.metaLast, s.hold = metaLast, 2
		p := s.start(t)
		ctx, cancel := context.WithCancel(context.Background())
		var asked3 sync.WaitGroup
		asked3.Add(1)
		done := make(chan listed)
		go func() {
			done <- readVMIs(ctx, p, s, 3, func(told int) {
				if told == 2 {
					// Page 3 is asked for before page 2 is decoded.
					for t0 := time.Now(); s.asked.Load() < 3 && time.Since(t0) < 10*time.Second; {
						time.Sleep(time.Millisecond)
					}
					cancel()
				}
			}, ahead)
		}()
		var got listed
		select {
		case got = <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("the read did not end when cancelled")
		}
		if !errors.Is(got.err, context.Canceled) {
			t.Errorf("metaLast=%v: want the context's error, got %v", metaLast, got.err)
		}
		if fmt.Sprint(got.told) != "[3 6]" {
			t.Errorf("metaLast=%v: told %v, want [3 6]", metaLast, got.told)
		}
		if n := aheadGoroutines(); n != 0 {
			t.Errorf("metaLast=%v: %d pages still fetched ahead after the read", metaLast, n)
		}
	}
}

// The server's work on a page overlaps the decoding of the page before
// it. The server takes 40 ms a page and the reader 40 ms to handle one
// (its page func sleeps): eight pages read in turn take 8 × 80 ms; read
// ahead about 40 + 8 × 40 ms. What is asserted is the mechanism: while the
// reader handles page n, the server is asked for page n+1 (waited for, up
// to 5 s, so that a loaded machine does not decide). The times are logged,
// not asserted: a timed assertion fails on a busy machine.
func TestLeanList_aheadOverlapsServerAndDecoding(t *testing.T) {
	const pages, d = 8, 40 * time.Millisecond
	took := func(read vmiReader, isAhead bool) time.Duration {
		s := newPageServer(pages * 5)
		s.delay = d
		p := s.start(t)
		t0 := time.Now()
		overlapped := 0
		got := readVMIs(context.Background(), p, s, 5, func(told int) {
			// Page told is handled now; page told+1 is the one asked
			// ahead (there is none after the last).
			asked := func() bool { return int(s.asked.Load()) > told }
			if isAhead && told < pages {
				for t1 := time.Now(); !asked() && time.Since(t1) < 5*time.Second; {
					time.Sleep(time.Millisecond)
				}
			}
			time.Sleep(d)
			if asked() {
				overlapped++
			}
		}, read)
		if got.err != nil || len(got.names) != pages*5 {
			t.Fatalf("read %d VMIs: %v", len(got.names), got.err)
		}
		if want := map[bool]int{true: pages - 1, false: 0}[isAhead]; overlapped != want {
			t.Errorf("ahead %v: the next page was asked for while %d of the first %d pages were handled, want %d", isAhead, overlapped, pages-1, want)
		}
		return time.Since(t0)
	}
	tAhead, tTurn := took(ahead, true), took(turn, false)
	t.Logf("%d pages of %s each, handled in %s each: in turn %s, ahead %s", pages, d, d, tTurn, tAhead)
}

// continueOf reads the continue token the page's decode reads, from a
// body whose top-level object has no member twice, in any order of its
// members, whatever strings, escapes and spaces it holds.
func FuzzContinueOf(f *testing.F) {
	for _, s := range []string{
		`{"kind":"VirtualMachineInstanceList","apiVersion":"kubevirt.io/v1","metadata":{"resourceVersion":"7","continue":"tok"},"items":[]}`,
		`{"apiVersion":"kubevirt.io/v1","items":[{"metadata":{"continue":"no"}}],"kind":"VirtualMachineInstanceList","metadata":{"continue":"tok","remainingItemCount":3}}`,
		`{"items":[{"a":"}\"{"}],"metadata":{"continue":"t\"o\\k"},"kind":"x"}`,
		` { "items" : [ 1 , true , null , "\\" ] , "metadata" : { "continue" : "a" } } `,
		`{"metadata":{"continue":"\u0074ok"}}`,
		`{"m\u0065tadata":{"continue":"tok"}}`,
		`{"items":[],"metadata":{}}`,
		`{"items":{"metadata":{"continue":"no"}},"metadata":{"continue":"yes"}}`,
		`{"metadata":{"continue":"yes"},"items":{"metadata":{"continue":"no"}}}`,
		`{"items":"\\\\","metadata":{"continue":"x"}}`,
		`{"kind":"x","metadata":null,"items":[]}`,
		`{}`, `[]`, `"metadata"`, ``,
	} {
		f.Add([]byte(s))
	}
	strict := jsonv2.JoinOptions(leanDecoding, jsontext.AllowDuplicateNames(false))
	f.Fuzz(func(t *testing.T, body []byte) {
		var pg struct {
			Metadata metav1.ListMeta `json:"metadata"`
			Items    jsontext.Value  `json:"items"`
		}
		got := continueOf(body)
		if jsonv2.Unmarshal(body, &pg, strict) != nil {
			return
		}
		if got != pg.Metadata.Continue {
			t.Fatalf("continueOf %q, the decode %q, of %s", got, pg.Metadata.Continue, body)
		}
	})
}

// continueOf agrees with the decode on random pages: random members
// (metadata among them, at any place) whose values are random JSON with
// strings full of quotes, backslashes, brackets and escapes.
func TestContinueOf_randomPages(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pieces := []string{`a`, `\"`, `\\`, `{`, `}`, `[`, `]`, `,`, `:`, `metadata`, `continue`, `\u0022`, `é`, ` `, `\n`}
	str := func() string {
		var b strings.Builder
		b.WriteByte('"')
		for range r.IntN(6) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		b.WriteByte('"')
		return b.String()
	}
	var value func(depth int) string
	value = func(depth int) string {
		switch k := r.IntN(7); {
		case depth > 3 || k == 0:
			return []string{`1`, `-2.5e3`, `true`, `false`, `null`}[r.IntN(5)]
		case k <= 2:
			return str()
		case k <= 4:
			var parts []string
			for range r.IntN(4) {
				parts = append(parts, value(depth+1))
			}
			return "[" + strings.Join(parts, ",") + "]"
		default:
			var parts []string
			for range r.IntN(4) {
				parts = append(parts, str()+":"+value(depth+1))
			}
			return "{" + strings.Join(parts, ",") + "}"
		}
	}
	space := func() string { return []string{"", "", " ", "\n  "}[r.IntN(4)] }
	strict := jsonv2.JoinOptions(leanDecoding, jsontext.AllowDuplicateNames(false))
	agreed := 0
	for range 20000 {
		members := []string{`"kind":"List"`, `"apiVersion":"v1"`, `"items":` + value(0)}
		if r.IntN(8) > 0 {
			meta := `{"resourceVersion":"7"}`
			if r.IntN(4) > 0 {
				meta = `{"resourceVersion":"7",` + space() + `"continue":` + str() + space() + `}`
			}
			members = append(members, `"metadata":`+space()+meta)
		}
		r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		for i := range members {
			members[i] = space() + members[i] + space()
		}
		body := []byte(space() + "{" + strings.Join(members, ",") + "}" + space())
		var pg struct {
			Metadata metav1.ListMeta `json:"metadata"`
			Items    jsontext.Value  `json:"items"`
		}
		if err := jsonv2.Unmarshal(body, &pg, strict); err != nil {
			continue // a random string that is not JSON
		}
		agreed++
		if got := continueOf(body); got != pg.Metadata.Continue {
			t.Fatalf("continueOf %q, the decode %q, of %s", got, pg.Metadata.Continue, body)
		}
	}
	if agreed < 5000 {
		t.Fatalf("only %d of the random pages decode", agreed)
	}
}

// The VMs' LIST starts once the server has answered the VMIs' first page,
// before that page has arrived whole: the server here sends the VMI
// page's body only once the VMs are asked for (or after 10 s).
func TestReadAll_nextKindStartsWhenTheFirstPageIsAnswered(t *testing.T) {
	vmsAsked := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/virtualmachineinstances"):
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			select {
			case <-vmsAsked:
			case <-time.After(10 * time.Second):
			}
			fmt.Fprint(w, `{"apiVersion":"kubevirt.io/v1","items":[{"metadata":{"name":"a","namespace":"ns"}}],"kind":"VirtualMachineInstanceList","metadata":{"resourceVersion":"7"}}`)
		case strings.HasSuffix(r.URL.Path, "/virtualmachines"):
			once.Do(func() { close(vmsAsked) })
			fmt.Fprint(w, `{"apiVersion":"kubevirt.io/v1","items":[],"kind":"VirtualMachineList","metadata":{"resourceVersion":"7"}}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	p, err := NewPageReader(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	var s snapshot.Snapshot
	t0 := time.Now()
	o := StorageRead{PageSize: 500, Pages: p, Kinds: snapshot.KindVMIs | snapshot.KindVMs}
	if err := o.readAll(context.Background(), nil, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.VMIs) != 1 {
		t.Fatalf("read %d VMIs, want 1", len(s.VMIs))
	}
	select {
	case <-vmsAsked:
	default:
		t.Fatal("the VMs were never asked for")
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("took %s: the VMs were asked for only once the VMIs' first page had arrived", d)
	}
}
