package release

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"
	"time"
)

// entry is one file or directory of a tar archive.
type entry struct {
	name     string // relative, "/"-separated; directories end in "/"
	mode     int64
	uid, gid int
	data     []byte
	path     string // read data from this file instead
}

func dir(name string, mode int64, uid int) entry {
	return entry{name: name, mode: mode, uid: uid, gid: uid}
}

func file(name string, mode int64, data []byte) entry {
	return entry{name: name, mode: mode, data: data}
}

func fileFrom(name string, mode int64, path string) entry {
	return entry{name: name, mode: mode, path: path}
}

// writeTar writes es as a tar stream in name order, every time stamp mtime
// and no user or group names, so the same entries give the same bytes.
func writeTar(w io.Writer, es []entry, mtime time.Time) error {
	es = append([]entry(nil), es...)
	sort.Slice(es, func(i, j int) bool { return es[i].name < es[j].name })
	tw := tar.NewWriter(w)
	for _, e := range es {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: mtime, Format: tar.FormatUSTAR}
		data := e.data
		if e.path != "" {
			var err error
			if data, err = os.ReadFile(e.path); err != nil {
				return err
			}
		}
		if e.name[len(e.name)-1] == '/' {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("writing %s: %v", e.name, err)
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("writing %s: %v", e.name, err)
		}
	}
	return tw.Close()
}

// tarBytes is writeTar into memory.
func tarBytes(es []entry, mtime time.Time) ([]byte, error) {
	var b bytes.Buffer
	err := writeTar(&b, es, mtime)
	return b.Bytes(), err
}
