package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/fxamacker/cbor/v2"
	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/client-go/rest"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/kubevirt/check"
)

// allReads are the LISTs tether sends for all checks (a GET of virt-api's
// webhook configuration aside): the raw contestants' share of them.
var allReads = []string{
	"/apis/kubevirt.io/v1/virtualmachineinstances",
	"/apis/kubevirt.io/v1/virtualmachines",
	"/api/v1/pods",
	"/api/v1/persistentvolumeclaims",
	"/apis/cdi.kubevirt.io/v1beta1/datavolumes",
	"/api/v1/nodes",
	"/apis/storage.k8s.io/v1/volumeattachments",
	"/api/v1/persistentvolumes",
	"/apis/storage.k8s.io/v1/csidrivers",
	"/apis/kubevirt.io/v1/kubevirts",
}

// Media types a raw contestant asks for.
const (
	mediaJSON     = "application/json"
	mediaProtobuf = "application/vnd.kubernetes.protobuf"
	mediaCBOR     = "application/cbor"
)

// wire is how a raw contestant asks for its pages: one lever each.
type wire struct {
	// gzip accepts compressed answers (Go's transport, as every
	// client-go client unless told otherwise).
	gzip bool
	// builtin and custom are the media types asked for the built-in
	// kinds and the custom resources.
	builtin, custom string
	// limit is the page size (0: one LIST a kind).
	limit int
	// watchList reads each kind as a watch that sends its objects first
	// (sendInitialEvents), ending at the bookmark that closes them.
	watchList bool
}

// builtinPath says whether the API path is a built-in kind's: served in
// protobuf, never in CBOR unless the server says so.
func builtinPath(p string) bool {
	return strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/apis/storage.k8s.io/")
}

// rawRead reads every path in turn as w says and throws the bytes away:
// what the API server alone spends to serve those reads.
func rawRead(ctx context.Context, cfg *rest.Config, paths []string, w wire) (result, error) {
	var ctr clients.Counter
	rc := unlimited(cfg, &ctr)
	rc.DisableCompression = !w.gzip
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return result{}, err
	}
	t0 := time.Now()
	var total int64
	for _, p := range paths {
		media := w.custom
		if builtinPath(p) {
			media = w.builtin
		}
		var n int64
		if w.watchList {
			n, err = watchList(ctx, hc, rc.Host+p)
		} else {
			n, err = pagesOf(ctx, hc, rc.Host+p, media, w.limit, nil)
		}
		if err != nil {
			return result{}, err
		}
		total += n
	}
	return result{wall: time.Since(t0), requests: ctr.Total(), output: total}, nil
}

// pagesOf GETs every page of the LIST at url in media, hands each page's
// body to each (when not nil) and returns the bytes read; a kind not served
// reads none.
func pagesOf(ctx context.Context, hc *http.Client, url, media string, limit int, each func(body []byte) error) (int64, error) {
	var total int64
	cont := ""
	for {
		sep := "?"
		if strings.Contains(url, "?") {
			sep = "&"
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s%slimit=%d&continue=%s", url, sep, limit, cont), nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Accept", media)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, err
		}
		if resp.StatusCode == http.StatusNotFound {
			return total, nil
		}
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("GET %s as %s: %s", url, media, resp.Status)
		}
		if got := resp.Header.Get("Content-Type"); !strings.HasPrefix(got, media) {
			return 0, fmt.Errorf("GET %s as %s: the server answered %s", url, media, got)
		}
		total += int64(len(body))
		if each != nil {
			if err := each(body); err != nil {
				return 0, err
			}
		}
		if cont, err = continueOf(body, media); err != nil || cont == "" {
			return total, err
		}
	}
}

// continueOf is a list's metadata.continue in media.
func continueOf(body []byte, media string) (string, error) {
	switch media {
	case mediaProtobuf:
		return protobufContinue(body)
	case mediaCBOR:
		var l struct {
			Metadata struct {
				Continue string `cbor:"continue"`
			} `cbor:"metadata"`
		}
		if err := cborLists.Unmarshal(body, &l); err != nil {
			return "", fmt.Errorf("a CBOR list: %w", err)
		}
		return l.Metadata.Continue, nil
	}
	return continueToken(body), nil
}

// protobufContinue reads metadata.continue of a list in Kubernetes'
// protobuf envelope: the magic "k8s\x00", a runtime.Unknown whose field 2
// (raw) is the list, whose field 1 is its ListMeta, whose field 3 is the
// token.
func protobufContinue(body []byte) (string, error) {
	if !bytes.HasPrefix(body, []byte("k8s\x00")) {
		return "", errors.New("not Kubernetes' protobuf envelope")
	}
	raw, err := protoField(body[4:], 2)
	if err != nil {
		return "", err
	}
	meta, err := protoField(raw, 1)
	if err != nil {
		return "", err
	}
	cont, err := protoField(meta, 3)
	return string(cont), err
}

// protoField is the last bytes field num of the message b (nil when it
// has none).
func protoField(b []byte, num protowire.Number) ([]byte, error) {
	var out []byte
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return nil, protowire.ParseError(l)
		}
		b = b[l:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return nil, protowire.ParseError(l)
			}
			out, b = v, b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return nil, protowire.ParseError(l)
		}
		b = b[l:]
	}
	return out, nil
}

// initialEventsEnd marks the bookmark that ends a watch's initial events.
var initialEventsEnd = []byte(`"k8s.io/initial-events-end":"true"`)

// watchList reads the kind at url as a watch that first sends every
// object (sendInitialEvents), up to the bookmark that says they are all
// sent, and returns the bytes read. Watches are never compressed.
func watchList(ctx context.Context, hc *http.Client, url string) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", mediaJSON)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return 0, nil
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, fmt.Errorf("watch-list %s: %s %s", url, resp.Status, b)
	}
	r := bufio.NewReaderSize(resp.Body, 1<<20)
	var total int64
	for {
		line, err := r.ReadBytes('\n')
		total += int64(len(line))
		if bytes.Contains(line, initialEventsEnd) && bytes.Contains(line, []byte(`"BOOKMARK"`)) {
			return total, nil
		}
		if err != nil {
			return total, fmt.Errorf("watch-list %s ended before its initial events did: %w", url, err)
		}
	}
}

// newShare names the raw contestant of the levers' run that reads as
// tether reads by default (JSON for custom resources, protobuf for the
// built-in kinds, compressed): the share wall times are compared with.
const newShare = "share: gzip, proto, JSON CRs"

// leverContestants are the jobs of -levers at n VMIs: the loop, every
// lever on and off as raw reads of all checks' kinds, and tether's all
// checks with and without CBOR, beside the base binary's.
func leverContestants(o auditOptions, n int, bin string) []contestant {
	var cs []contestant
	if o.loopMax <= 0 || n <= o.loopMax {
		cs = append(cs, contestant{"list-and-get loop", func(ctx context.Context, at endpoint) (result, error) { return listAndGet(ctx, at.cfg) }})
	}
	raw := func(name string, w wire) contestant {
		return contestant{name, func(ctx context.Context, at endpoint) (result, error) { return rawRead(ctx, at.cfg, allReads, w) }}
	}
	cs = append(cs,
		// The control: what the control plane spends in a second of
		// nothing (its own loops), to read the other figures against.
		contestant{"idle, 1 s", func(ctx context.Context, at endpoint) (result, error) {
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return result{}, ctx.Err()
			}
			return result{wall: time.Second}, nil
		}},
		raw(newShare, wire{gzip: true, builtin: mediaProtobuf, custom: mediaJSON, limit: 500}),
		raw("raw identity, proto", wire{builtin: mediaProtobuf, custom: mediaJSON, limit: 500}),
		raw("raw gzip, JSON built-ins", wire{gzip: true, builtin: mediaJSON, custom: mediaJSON, limit: 500}),
		raw("raw identity, JSON built-ins", wire{builtin: mediaJSON, custom: mediaJSON, limit: 500}),
		raw("raw identity, proto, unpaged", wire{builtin: mediaProtobuf, custom: mediaJSON}),
		raw("raw identity, proto, pages 2000", wire{builtin: mediaProtobuf, custom: mediaJSON, limit: 2000}),
		raw("raw watch-list (JSON)", wire{watchList: true}),
	)
	if o.cbor {
		cs = append(cs, raw("share --cbor: gzip, proto, CBOR", wire{gzip: true, builtin: mediaProtobuf, custom: mediaCBOR, limit: 500}))
	}
	cs = append(cs,
		binary(bin, "tether all checks -o json", "-o", "json"),
		// On a server without CBOR this is the JSON job again: the
		// fallback's cost.
		binary(bin, "same, --cbor", "-o", "json", "--cbor"),
		binary(bin, "tether one check -o json", "--checks", check.OrphanHotplugVolume, "-o", "json"),
	)
	if o.base != "" {
		cs = append(cs,
			binary(o.base, "base all checks -o json", "-o", "json"),
			binary(o.base, "base one check -o json", "--checks", check.OrphanHotplugVolume, "-o", "json"),
		)
	}
	return cs
}

// cborGates are the API server's feature gates that serve custom
// resources in CBOR (alpha in Kubernetes 1.36).
const cborGates = "CBORServingAndStorage=true"

// cborLists decodes the API server's CBOR, whose strings, map keys among
// them, are byte strings.
var cborLists = func() cbor.DecMode {
	m, err := cbor.DecOptions{ByteStringToString: cbor.ByteStringToStringAllowed, FieldNameByteString: cbor.FieldNameByteStringAllowed}.DecMode()
	if err != nil {
		panic(err) // static options
	}
	return m
}()
