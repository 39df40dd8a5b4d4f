package bundle

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// jsonStream is one file read as JSON values one after another, with text
// between them (kubectl cluster-info dump writes logs between its lists):
// the bytes the last value's decoder read beyond its value (back), then
// the file. Each value's decoder reads through the one stream, so a file
// of many values costs what one does: wrapping a new buffered reader
// around the last for each value would nest them as deep as the file has
// values, each with a buffer of its own.
type jsonStream struct {
	back [][]byte
	br   *bufio.Reader
	// read counts the bytes handed to decoders; from mark on, no more
	// than limit may be read (one object larger than the bound).
	read, mark, limit int64
}

func (s *jsonStream) Read(p []byte) (int, error) {
	if s.limit > 0 && s.read-s.mark > s.limit {
		return 0, fmt.Errorf("an object larger than --max-object-size (%d bytes): the rest of the file is left unread", s.limit)
	}
	for len(s.back) > 0 {
		if len(s.back[0]) == 0 {
			s.back = s.back[1:]
			continue
		}
		n := copy(p, s.back[0])
		s.back[0] = s.back[0][n:]
		s.read += int64(n)
		return n, nil
	}
	n, err := s.br.Read(p)
	s.read += int64(n)
	return n, err
}

// begin marks the start of one object, from which limit counts.
func (s *jsonStream) begin() { s.mark = s.read }

// peek skips white space and says the next byte, left unread; ok is false
// at the end of the file.
func (s *jsonStream) peek() (c byte, ok bool, err error) {
	for len(s.back) > 0 {
		b := bytes.TrimLeft(s.back[0], space)
		if len(b) > 0 {
			s.back[0] = b
			return b[0], true, nil
		}
		s.back = s.back[1:]
	}
	for {
		c, err := s.br.ReadByte()
		if err == io.EOF {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, err
		}
		if bytes.IndexByte([]byte(space), c) < 0 {
			return c, true, s.br.UnreadByte()
		}
	}
}

// space is what peek skips: white space and a byte order mark's bytes.
const space = " \t\r\n\xef\xbb\xbf"

// skipLine drops the rest of the line; more is false at the end of the
// file.
func (s *jsonStream) skipLine() (more bool, err error) {
	for len(s.back) > 0 {
		if i := bytes.IndexByte(s.back[0], '\n'); i >= 0 {
			s.back[0] = s.back[0][i+1:]
			return true, nil
		}
		s.back = s.back[1:]
	}
	for {
		_, err := s.br.ReadSlice('\n')
		switch err {
		case nil:
			return true, nil
		case bufio.ErrBufferFull:
			continue
		case io.EOF:
			return false, nil
		}
		return false, err
	}
}

// unread takes back what dec read beyond its value.
func (s *jsonStream) unread(dec *json.Decoder) {
	rest, _ := io.ReadAll(dec.Buffered())
	s.read -= int64(len(rest))
	if len(rest) > 0 {
		s.back = append([][]byte{rest}, s.back...)
	}
}
