// Package storezip writes a zip archive whose files are stored, not
// compressed: the planner page's download of every generated file at once.
// archive/zip would bring its deflate compressor into the page's
// WebAssembly module, about 40 KiB of a module that must stay under 2 MiB;
// the files are a few hundred KiB of text, and the page is served gzipped.
package storezip

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
)

// Write returns a zip of files, in the order of names, each stored under
// its name (UTF-8) with no time (1980-01-01, zip's zero). It fails for an
// archive past zip's 32-bit sizes.
func Write(names []string, files map[string][]byte) ([]byte, error) {
	var out, central bytes.Buffer
	le := func(b *bytes.Buffer, vs ...any) {
		for _, v := range vs {
			_ = binary.Write(b, binary.LittleEndian, v)
		}
	}
	const (
		version = uint16(20) // 2.0: stored files
		utf8    = uint16(1 << 11)
		date    = uint16(1<<5 | 1) // 1980-01-01
	)
	for _, name := range names {
		data := files[name]
		if len(data) > math.MaxUint32 || len(name) > math.MaxUint16 || out.Len() > math.MaxUint32 {
			return nil, errors.New("storezip: the archive is too large for zip without its 64-bit extension")
		}
		crc, size, offset := crc32.ChecksumIEEE(data), uint32(len(data)), uint32(out.Len())
		le(&out, uint32(0x04034b50), version, utf8, uint16(0), uint16(0), date, crc, size, size, uint16(len(name)), uint16(0))
		out.WriteString(name)
		out.Write(data)
		le(&central, uint32(0x02014b50), version, version, utf8, uint16(0), uint16(0), date, crc, size, size,
			uint16(len(name)), uint16(0), uint16(0), uint16(0), uint16(0), uint32(0), offset)
		central.WriteString(name)
	}
	if len(names) > math.MaxUint16 || out.Len() > math.MaxUint32 {
		return nil, errors.New("storezip: too many files for zip without its 64-bit extension")
	}
	offset := uint32(out.Len())
	out.Write(central.Bytes())
	le(&out, uint32(0x06054b50), uint16(0), uint16(0), uint16(len(names)), uint16(len(names)), uint32(central.Len()), offset, uint16(0))
	return out.Bytes(), nil
}
