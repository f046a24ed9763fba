package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// postgresUser is the unprivileged user a root process runs PostgreSQL as
// (PostgreSQL refuses to run as root).
type postgresUser struct {
	name string
	cred *syscall.Credential
	gids []uint32 // its groups, the primary one included
}

// runAs returns the user PostgreSQL runs as: nil when this process is not
// root (PostgreSQL runs as this user), else "postgres" or "nobody".
func runAs() (*postgresUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		pu := &postgresUser{name: name, cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, gids: []uint32{uint32(gid)}}
		groups, _ := u.GroupIds()
		for _, g := range groups {
			if n, err := strconv.Atoi(g); err == nil {
				pu.gids = append(pu.gids, uint32(n))
			}
		}
		return pu, nil
	}
	return nil, errors.New("running as root and no unprivileged user (postgres, nobody) to run PostgreSQL as")
}

// credential is the credential to start PostgreSQL's processes with (nil
// for this process's own).
func (u *postgresUser) credential() *syscall.Credential {
	if u == nil {
		return nil
	}
	return u.cred
}

// UnreachableError is a folder on the way to PostgreSQL's files that the
// user PostgreSQL runs as cannot enter, and that idemhook leaves as it is
// (it is not the cache folder's, or below it).
type UnreachableError struct {
	User string // the user PostgreSQL runs as
	Dir  string // the folder that user cannot enter
	Path string // what PostgreSQL needs beyond it
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("PostgreSQL runs as user %s (it refuses to run as root), who cannot enter %s on the way to %s: chmod o+x %s, "+
		"or set IDEMHOOK_CACHE_DIR to a folder %s can reach (for root the default is /var/cache/idemhook)", e.User, e.Dir, e.Path, e.Dir, e.User)
}

// openTo lets u enter every folder on the way to path (path included when
// it is a folder), as far as they exist. A folder from cache down is
// idemhook's (the user gave it to idemhook's installs, for one
// IDEMHOOK_CACHE_DIR=$(mktemp -d), which is 0700): it gets o+x, search
// only, said on progress. Any other folder u cannot enter is an
// *UnreachableError. A nil u (not root) needs nothing.
func (u *postgresUser) openTo(path, cache string, progress io.Writer) error {
	if u == nil {
		return nil
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	dirs := []string{path}
	for d := path; d != filepath.Dir(d); {
		d = filepath.Dir(d)
		dirs = append(dirs, d)
	}
	slices.Reverse(dirs) // from / down
	for _, d := range dirs {
		fi, err := os.Stat(d)
		if errors.Is(err, os.ErrNotExist) {
			return nil // made later, by idemhook
		}
		if err != nil {
			return err
		}
		if !fi.IsDir() || u.canEnter(fi) {
			continue
		}
		if cache == "" || (d != cache && !strings.HasPrefix(d, cache+string(filepath.Separator))) {
			return &UnreachableError{User: u.name, Dir: d, Path: path}
		}
		if err := os.Chmod(d, fi.Mode().Perm()|0o001); err != nil {
			return fmt.Errorf("let user %s enter %s: %w", u.name, d, err)
		}
		fmt.Fprintf(progress, "stack: PostgreSQL runs as user %s, not root: let it enter %s (chmod o+x)\n", u.name, d)
	}
	return nil
}

// canEnter reports whether u may search the folder fi describes.
func (u *postgresUser) canEnter(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	mode := fi.Mode().Perm()
	switch {
	case st.Uid == u.cred.Uid:
		return mode&0o100 != 0
	case slices.Contains(u.gids, st.Gid):
		return mode&0o010 != 0
	}
	return mode&0o001 != 0
}
