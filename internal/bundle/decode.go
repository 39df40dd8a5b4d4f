package bundle

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"sigs.k8s.io/yaml"
)

// header is what is read of every object before its kind is known.
type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

// read decodes h from an object's JSON, skipping all else without
// keeping it (for each of 100,000 items, the standard decoder's scan of the
// whole item was more garbage than the item), matching names exactly as
// the API server does.
func (h *header) read(raw []byte) error {
	return jsonv2.Unmarshal(raw, h, headerDecoding)
}

var headerDecoding = jsonv2.JoinOptions(jsonv2.MatchCaseInsensitiveNames(false), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// file reads one file's objects, as YAML (one or more documents, each an
// object or a List) or as JSON (one or more values, each an object, a List
// or an array of objects, with any text between them, as kubectl
// cluster-info dump writes logs between its lists). Lists are read one item
// at a time: a file of gigabytes costs what its objects of the kinds read
// cost. It returns how many objects it read (of any kind).
func (d *decoder) file(name string, r io.Reader) (int, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	first, err := firstByte(br)
	if err != nil {
		return 0, err
	}
	if peek, _ := br.Peek(64 << 10); !bytes.Contains(peek, []byte("apiVersion")) && !bytes.Contains(peek, []byte("kind")) {
		return 0, nil // no object begins in the first 64 KiB: a log or other text
	}
	f := &fileRead{d: d, name: name}
	if first == '{' || first == '[' {
		err = f.json(br)
	} else {
		err = f.yaml(br)
	}
	return f.objects, err
}

// firstByte is the first byte that is not white space, left unread.
func firstByte(br *bufio.Reader) (byte, error) {
	for {
		b, err := br.ReadByte()
		if err != nil {
			if err == io.EOF {
				return 0, nil
			}
			return 0, err
		}
		if b != ' ' && b != '\t' && b != '\n' && b != '\r' && b != 0xef && b != 0xbb && b != 0xbf {
			return b, br.UnreadByte()
		}
	}
}

// fileRead is the reading of one file.
type fileRead struct {
	d       *decoder
	name    string
	objects int
	doc     int
	// text counts the lines of a JSON file that were no JSON (logs).
	text int
	// stream is the file read as JSON; pended counts the bytes of the
	// items waiting for their List's kind.
	stream *jsonStream
	pended int64
}

// object hands one object's JSON to the decoder; listKind and
// listVersion name the List it came from, for items that do not name
// their own kind.
func (f *fileRead) object(raw []byte, listVersion, listKind string) error {
	f.objects++
	return f.d.object(f.name, f.doc, raw, listVersion, listKind)
}

// json reads JSON values one after another, skipping the lines between
// them that are not JSON.
func (f *fileRead) json(br *bufio.Reader) error {
	f.stream = &jsonStream{br: br, limit: f.d.max}
	for {
		c, ok, err := f.stream.peek()
		if err != nil || !ok {
			return err
		}
		if c != '{' && c != '[' {
			f.text++
			if more, err := f.stream.skipLine(); err != nil || !more {
				return err
			}
			continue
		}
		f.doc++
		f.stream.begin()
		dec := json.NewDecoder(f.stream)
		if err := f.jsonValue(dec); err != nil {
			return fmt.Errorf("JSON value %d: %w", f.doc, err)
		}
		f.stream.unread(dec)
	}
}

// jsonValue reads one JSON value: an object, a List whose items are read
// one at a time, or an array of objects.
func (f *fileRead) jsonValue(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == json.Delim('[') {
		if err := f.jsonItems(dec, "", "", nil); err != nil {
			return err
		}
		return nil
	}
	head := map[string]json.RawMessage{}
	var pending []json.RawMessage
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := k.(string)
		if key == "items" {
			t, err := dec.Token()
			if err != nil {
				return err
			}
			if t == json.Delim('[') {
				var v, kd string
				_ = json.Unmarshal(head["apiVersion"], &v)
				_ = json.Unmarshal(head["kind"], &kd)
				if err := f.jsonItems(dec, v, kd, &pending); err != nil {
					return err
				}
			}
			continue
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		head[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	var h header
	_ = json.Unmarshal(head["kind"], &h.Kind)
	_ = json.Unmarshal(head["apiVersion"], &h.APIVersion)
	if _, isList := head["items"]; !isList && !strings.HasSuffix(h.Kind, "List") {
		raw, err := json.Marshal(head)
		if err != nil {
			return err
		}
		return f.object(raw, "", "")
	}
	f.d.lists++
	for _, raw := range pending {
		if err := f.object(raw, h.APIVersion, h.Kind); err != nil {
			return err
		}
	}
	return nil
}

// jsonItems reads the items of an array, the '[' already read. An item
// that does not name its kind, in a List whose kind is not read yet (its
// "kind" comes after "items"), waits in pending.
func (f *fileRead) jsonItems(dec *json.Decoder, listVersion, listKind string, pending *[]json.RawMessage) error {
	// One buffer for every item: each is decoded into what is kept of it
	// (a copy) before the next is read, so a List of 100,000 items makes
	// one item's garbage, not 100,000 (an item kept whole, pending, is
	// copied).
	var raw json.RawMessage
	for dec.More() {
		f.stream.begin()
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		if int64(len(raw)) > f.d.max {
			f.d.skip(f.name, fmt.Sprintf("an item of %d bytes, more than --max-object-size allows", len(raw)), false)
			continue
		}
		if listKind == "" && pending != nil {
			var h header
			if h.read(raw) == nil && h.Kind == "" {
				f.pend(pending, slices.Clone(raw))
				continue
			}
		}
		if err := f.object(raw, listVersion, listKind); err != nil {
			return err
		}
	}
	_, err := dec.Token()
	return err
}

// pend keeps an item until its List names its kind, up to
// --max-object-size of such items in all; beyond that they are skipped.
func (f *fileRead) pend(pending *[]json.RawMessage, raw json.RawMessage) {
	if f.pended += int64(len(raw)); f.pended > f.d.max {
		if f.pended-int64(len(raw)) > f.d.max {
			return // said once
		}
		f.d.skip(f.name, fmt.Sprintf("JSON value %d: items that name no kind, in a List that names its kind only after them, of more than --max-object-size (%d bytes) in all", f.doc, f.d.max), false)
		return
	}
	*pending = append(*pending, raw)
}

// yaml reads YAML documents. A document with a top-level "items:" block
// (a List as kubectl writes it) hands over each item as soon as it ends.
func (f *fileRead) yaml(br *bufio.Reader) error {
	y := yamlDoc{f: f}
	for {
		line, long, err := readLine(br, f.d.max)
		if long {
			y.tooBig = true
		} else if len(line) > 0 {
			if perr := y.line(line); perr != nil {
				return perr
			}
		}
		if err == io.EOF {
			return y.end()
		}
		if err != nil {
			return err
		}
	}
}

// readLine reads one line, its end included, up to max bytes; of a longer
// line it reads the rest and drops it, and says so (long).
func readLine(br *bufio.Reader, max int64) (line []byte, long bool, err error) {
	line, err = br.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return line, false, err
	}
	buf := append([]byte(nil), line...)
	for err == bufio.ErrBufferFull {
		line, err = br.ReadSlice('\n')
		if !long && int64(len(buf)+len(line)) > max {
			long, buf = true, nil
		}
		if !long {
			buf = append(buf, line...)
		}
	}
	return buf, long, err
}

// yamlDoc is the document being read: its top-level lines other than the
// items (head), and the item being read.
type yamlDoc struct {
	f          *fileRead
	head, item bytes.Buffer
	inItems    bool
	// indent is the indentation of the items' "- " (-1 until the first).
	indent  int
	tooBig  bool
	started bool
}

func (y *yamlDoc) line(l []byte) error {
	t := bytes.TrimRight(l, " \t\r\n")
	if bytes.Equal(t, []byte("---")) || bytes.HasPrefix(t, []byte("--- ")) || bytes.Equal(t, []byte("...")) {
		return y.end()
	}
	if !y.started {
		y.started = true
		y.f.doc++
	}
	if y.inItems && y.itemLine(l, t) {
		return y.checkSize()
	}
	if bytes.Equal(t, []byte("items:")) {
		y.inItems, y.indent = true, -1
		return nil
	}
	y.head.Write(l)
	return y.checkSize()
}

// itemLine takes l into the items when it belongs to them, and says so.
func (y *yamlDoc) itemLine(l, t []byte) bool {
	trimmed := bytes.TrimLeft(t, " ")
	n := len(t) - len(trimmed)
	if len(trimmed) == 0 || trimmed[0] == '#' {
		if y.item.Len() > 0 {
			y.item.WriteByte('\n')
		}
		return true
	}
	isDash := bytes.HasPrefix(trimmed, []byte("- ")) || bytes.Equal(trimmed, []byte("-"))
	switch {
	case y.indent < 0 && isDash:
		y.indent = n
	case y.indent >= 0 && n == y.indent && isDash:
		y.flushItem()
	case y.indent >= 0 && n > y.indent:
		y.item.Write(l[min(len(l), y.indent+2):])
		return true
	default:
		y.flushItem()
		y.inItems = false
		return false
	}
	y.item.Write(l[min(len(l), y.indent+2):])
	return true
}

func (y *yamlDoc) checkSize() error {
	if int64(y.head.Len()) > y.f.d.max || int64(y.item.Len()) > y.f.d.max {
		y.tooBig = true
		y.head.Reset()
		y.item.Reset()
	}
	return nil
}

// flushItem hands over the item read so far.
func (y *yamlDoc) flushItem() {
	if y.item.Len() == 0 {
		return
	}
	defer y.item.Reset()
	y.yamlObject(y.item.Bytes(), true)
}

// end ends the document.
func (y *yamlDoc) end() error {
	y.flushItem()
	if y.tooBig {
		y.f.d.skip(y.f.name, fmt.Sprintf("document %d: an object larger than --max-object-size (%d bytes)", y.f.doc, y.f.d.max), false)
	} else if len(bytes.TrimSpace(y.head.Bytes())) > 0 {
		y.yamlObject(y.head.Bytes(), false)
	}
	*y = yamlDoc{f: y.f}
	return nil
}

// yamlObject converts one object (or a List's head, or a whole List in
// flow style) to JSON and hands it over; YAML that cannot be read is a
// skip of that document.
func (y *yamlDoc) yamlObject(b []byte, item bool) {
	if !bytes.Contains(b, []byte(":")) {
		return
	}
	raw, err := yaml.YAMLToJSON(b)
	if err != nil {
		y.f.d.skip(y.f.name, fmt.Sprintf("document %d: not YAML (%v)", y.f.doc, firstLine(err.Error())), false)
		return
	}
	if item {
		_ = y.f.object(raw, "", "")
		return
	}
	var list struct {
		header
		Items []json.RawMessage `json:"items"`
	}
	if json.Unmarshal(raw, &list) != nil || len(raw) == 0 || raw[0] != '{' {
		y.f.d.skip(y.f.name, fmt.Sprintf("document %d: not a Kubernetes object", y.f.doc), true)
		return
	}
	if list.Items == nil && !strings.HasSuffix(list.Kind, "List") {
		_ = y.f.object(raw, "", "")
		return
	}
	y.f.d.lists++
	for _, it := range list.Items {
		_ = y.f.object(it, list.APIVersion, list.Kind)
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
