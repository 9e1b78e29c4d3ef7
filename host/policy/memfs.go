package policy

import (
	"bytes"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"
)

// memFS is the read-only, in-memory file system the policy snapshot is
// compiled from: OPA's loader reads an fs.FS, and the snapshot must be the
// exact bytes the digest was computed over. It is here rather than
// testing/fstest.MapFS so the CCM binary does not link the testing packages.
type memFS map[string][]byte

func (m memFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if data, ok := m[name]; ok {
		return &memFile{info: memInfo{name: path.Base(name), size: int64(len(data))}, r: bytes.NewReader(data)}, nil
	}
	// A directory is any prefix of a stored path; its entries are the
	// distinct next path elements below it.
	prefix := name + "/"
	if name == "." {
		prefix = ""
	}
	seen := map[string]bool{}
	var entries []fs.DirEntry
	for p, data := range m {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok {
			continue
		}
		first, _, isDir := strings.Cut(rest, "/")
		if seen[first] {
			continue
		}
		seen[first] = true
		info := memInfo{name: first, dir: isDir}
		if !isDir {
			info.size = int64(len(data))
		}
		entries = append(entries, fs.FileInfoToDirEntry(info))
	}
	if len(entries) == 0 && name != "." {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	return &memFile{info: memInfo{name: path.Base(name), dir: true}, entries: entries}, nil
}

type memFile struct {
	info    memInfo
	r       *bytes.Reader
	entries []fs.DirEntry
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memFile) Close() error               { return nil }
func (f *memFile) Read(p []byte) (int, error) {
	if f.r == nil {
		return 0, &fs.PathError{Op: "read", Path: f.info.name, Err: fs.ErrInvalid}
	}
	return f.r.Read(p)
}

// ReadDir makes a directory an fs.ReadDirFile, which fs.WalkDir needs.
func (f *memFile) ReadDir(n int) ([]fs.DirEntry, error) {
	if n <= 0 {
		all := f.entries
		f.entries = nil
		return all, nil
	}
	if len(f.entries) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(f.entries))
	out := f.entries[:n]
	f.entries = f.entries[n:]
	return out, nil
}

type memInfo struct {
	name string
	size int64
	dir  bool
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }
