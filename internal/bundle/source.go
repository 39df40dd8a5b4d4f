package bundle

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"
)

// entry is one file of a bundle: its slash-separated path inside the
// bundle, its size and time as the directory or archive records them.
type entry struct {
	name    string
	size    int64
	modTime time.Time
}

// visit is told each file of a bundle with its content, once, in the order
// the directory or archive holds them; it must not keep r.
type visit func(e entry, r io.Reader) error

// walk hands every regular file of the bundle at p to fn: a directory, a
// tar archive (plain or gzip-compressed), a zip archive, or one file of
// objects. A truncated or corrupt archive is an error that says so: a
// bundle read in part would look like a cluster with fewer objects.
func walk(p string, fn visit) error {
	st, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("--from %s: %v", p, err)
	}
	if st.IsDir() {
		return walkDir(p, fn)
	}
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("--from %s: %v", p, err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	magic, _ := br.Peek(262)
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("--from %s: a gzip file that cannot be read: %v", p, err)
		}
		return walkTar(p, bufio.NewReaderSize(zr, 64<<10), fn, true)
	case bytes.HasPrefix(magic, []byte("PK\x03\x04")) || bytes.HasPrefix(magic, []byte("PK\x05\x06")):
		return walkZip(p, f, st.Size(), fn)
	case len(magic) >= 262 && bytes.Equal(magic[257:262], []byte("ustar")):
		return walkTar(p, br, fn, false)
	}
	return fn(entry{name: filepath.Base(p), size: st.Size(), modTime: st.ModTime()}, br)
}

func walkDir(root string, fn visit) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("--from %s: reading %s: %v", root, p, err)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("--from %s: %v", root, err)
		}
		rel, _ := filepath.Rel(root, p)
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("--from %s: %v", root, err)
		}
		defer f.Close()
		return fn(entry{name: filepath.ToSlash(rel), size: info.Size(), modTime: info.ModTime()}, f)
	})
}

// walkTar reads a tar stream; inner tar archives within it are files like
// any other.
func walkTar(p string, r io.Reader, fn visit, gzipped bool) error {
	tr := tar.NewReader(r)
	last := ""
	for n := 0; ; n++ {
		h, err := tr.Next()
		if err == io.EOF {
			if n == 0 {
				return fmt.Errorf("--from %s: the archive holds no file", p)
			}
			return nil
		}
		if err != nil {
			return truncated(p, last, n, err)
		}
		last = h.Name
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if err := fn(entry{name: path.Clean(h.Name), size: h.Size, modTime: h.ModTime}, tr); err != nil {
			if isTruncation(err) {
				return truncated(p, last, n, err)
			}
			return err
		}
	}
}

func walkZip(p string, f *os.File, size int64, fn visit) error {
	zr, err := zip.NewReader(f, size)
	if err != nil {
		return fmt.Errorf("--from %s: a zip archive that cannot be read (%v): it may be truncated; fetch it again, or unpack what is there and pass the directory", p, err)
	}
	for _, zf := range zr.File {
		if zf.FileInfo().IsDir() || !zf.Mode().IsRegular() {
			continue
		}
		rc, err := zf.Open()
		if err != nil {
			return fmt.Errorf("--from %s: %s: %v", p, zf.Name, err)
		}
		err = fn(entry{name: path.Clean(zf.Name), size: int64(zf.UncompressedSize64), modTime: zf.Modified}, rc)
		rc.Close()
		if err != nil {
			if isTruncation(err) || errors.Is(err, zip.ErrChecksum) {
				return fmt.Errorf("--from %s: %s is damaged (%v): fetch the archive again", p, zf.Name, err)
			}
			return err
		}
	}
	return nil
}

// isTruncation says whether err is an archive's stream ending early or
// failing its checksum.
func isTruncation(err error) bool {
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) ||
		errors.Is(err, tar.ErrHeader)
}

func truncated(p, last string, n int, err error) error {
	after := "before its first file"
	if last != "" {
		after = fmt.Sprintf("after %d file(s), at %s", n, last)
	}
	return fmt.Errorf("--from %s: the archive is truncated or damaged %s (%v): a bundle read in part would look like a cluster with fewer objects; "+
		"fetch it again, or unpack what is there and pass the directory (then what is missing is your call)", p, after, err)
}
