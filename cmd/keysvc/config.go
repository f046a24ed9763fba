package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemhook/idemhook/internal/buildinfo"
	"github.com/idemhook/idemhook/internal/duration"
	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/internal/keysvc/inbox"
	"github.com/idemhook/idemhook/signature"
)

// config is the command line and the environment, read and checked.
type config struct {
	addr         string
	databaseURL  string
	dbFile       string
	table        string
	createSchema bool
	maxBody      int64
	readTimeout  time.Duration
	writeTimeout time.Duration
	retention    time.Duration
	logLevel     string
	logSample    int
	token        string
	secrets      map[signature.Provider][]string
	tolerance    time.Duration

	endpoints []inbox.Endpoint
	inboxOpts inbox.Options
	// patternSchema shows the n8n inbox pattern's tables in the console;
	// consoleBodies lets admin tokens read the inbox's bodies there.
	patternSchema string
	consoleBodies bool

	tokensFile     string
	tokens         *keysvc.Tokens // from tokensFile
	insecureNoAuth bool
	signatureAuth  bool
	protectMetrics bool
	// given are the flags set on the command line (a default that depends
	// on the address yields to them).
	given             []string
	rateLimit         keysvc.RateLimit
	maxConnsPerClient int
	readHeaderTimeout time.Duration
	maxHeaderBytes    int
	tlsCert, tlsKey   string
}

// parseConfig reads the flags, with their environment variables as
// defaults, and the files they name; ok is false when keysvc must stop
// with code: 0 after --help or --version, 2 (and one line on stderr) for a
// command line or an environment that is wrong.
func parseConfig(args []string, stdout, stderr io.Writer) (cfg config, code int, ok bool) {
	fs := flag.NewFlagSet("keysvc", flag.ContinueOnError)
	named, err := cfg.register(fs)
	if err != nil {
		fmt.Fprintf(stderr, "keysvc: %v\n", err)
		return config{}, 2, false
	}
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: keysvc [flags]\n\nServes idemhook key derivation and reservation over HTTP (see /openapi.json).\n\n"+
			"The --endpoints file is JSON: {\"endpoints\": [{\"name\", \"provider\", \"secret_env\" | \"secret_file\", \"account\",\n"+
			"\"target\", \"target_token_env\" | \"target_token_file\", \"events\", \"max_attempts\", \"concurrency\", \"batch\"}]}:\n"+
			"each "+
			"field is described in docs/keysvc.md#the-durable-inbox-in-front-of-n8n, and idemhook generate --pattern inbox\n"+
			"--receiver keysvc writes an example (keysvc-endpoints.example.json).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	// --help prints the usage once, on stdout; a mistake, its one line and
	// where the help is, on stderr.
	fs.SetOutput(io.Discard)
	err = fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		return config{}, 0, false
	case err != nil:
		fmt.Fprintf(stderr, "keysvc: %v\nrun 'keysvc --help' for the flags\n", err)
		return config{}, 2, false
	case *named.version:
		fmt.Fprintln(stdout, buildinfo.Describe("keysvc"))
		return config{}, 0, false
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "keysvc: unexpected argument %q\n", fs.Arg(0))
		return config{}, 2, false
	}
	fs.Visit(func(f *flag.Flag) { cfg.given = append(cfg.given, f.Name) })
	if err = cfg.read(named); err == nil {
		err = cfg.check()
	}
	if err != nil {
		fmt.Fprintf(stderr, "keysvc: %v\n", err)
		return config{}, 2, false
	}
	return cfg, 0, true
}

// namedFiles are the flags read after parsing: the files they name, and
// --version.
type namedFiles struct {
	endpoints, token *string
	version          *bool
}

// register registers keysvc's flags on fs, each defaulting to its
// environment variable; an environment variable that does not parse is an
// error.
func (cfg *config) register(fs *flag.FlagSet) (namedFiles, error) {
	if err := cfg.registerStore(fs); err != nil {
		return namedFiles{}, err
	}
	if err := cfg.registerDurations(fs); err != nil {
		return namedFiles{}, err
	}
	endpoints, err := cfg.registerLogsAndInbox(fs)
	if err != nil {
		return namedFiles{}, err
	}
	token := cfg.registerAccess(fs)
	version := fs.Bool("version", false, "print keysvc's version (module version and VCS revision) and exit")
	return namedFiles{endpoints: endpoints, token: token, version: version}, nil
}

func (cfg *config) registerStore(fs *flag.FlagSet) error {
	fs.StringVar(&cfg.addr, "addr", env("KEYSVC_ADDR", "127.0.0.1:8080"), "listen `address` (KEYSVC_ADDR)")
	fs.StringVar(&cfg.databaseURL, "database-url", env("DATABASE_URL", ""), "PostgreSQL `URL`; empty uses the embedded store (DATABASE_URL)")
	fs.StringVar(&cfg.dbFile, "db-file", env("KEYSVC_DB_FILE", "keysvc.db"), "embedded store `file` (KEYSVC_DB_FILE)")
	fs.StringVar(&cfg.table, "table", env("KEYSVC_TABLE", "processed_events"), "PostgreSQL `table` of reservations, shared with the n8n workflows (KEYSVC_TABLE)")
	createDefault, err := envBool("KEYSVC_CREATE_SCHEMA", "false")
	if err != nil {
		return err
	}
	fs.BoolVar(&cfg.createSchema, "create-schema", createDefault, "create the PostgreSQL tables (reservations with lease columns; the inbox's and River's with --endpoints) if missing (KEYSVC_CREATE_SCHEMA)")
	maxBody, err := strconv.ParseInt(env("KEYSVC_MAX_BODY", strconv.Itoa(keysvc.DefaultMaxBodyBytes)), 10, 64)
	if err != nil {
		return errors.New("KEYSVC_MAX_BODY must be a number of bytes")
	}
	fs.Int64Var(&cfg.maxBody, "max-body", maxBody, "largest accepted body in `bytes` (16 MiB by default, n8n's own limit); larger gets a 413 that names this flag (KEYSVC_MAX_BODY)")
	return nil
}

func (cfg *config) registerDurations(fs *flag.FlagSet) error {
	durations := []struct {
		p          *time.Duration
		name, env  string
		def, usage string
	}{
		{&cfg.readTimeout, "read-timeout", "KEYSVC_READ_TIMEOUT", "10s", "time to read a request"},
		{&cfg.writeTimeout, "write-timeout", "KEYSVC_WRITE_TIMEOUT", "10s", "time to write a response"},
		{&cfg.retention, "retention", "KEYSVC_RETENTION", "30d", "delete reservations older than this, hourly; 0 disables"},
		{&cfg.tolerance, "signature-tolerance", "KEYSVC_SIGNATURE_TOLERANCE", "5m", "how far a signed timestamp may be from now, both ways"},
		{&cfg.inboxOpts.DeliveryTimeout, "inbox-delivery-timeout", "KEYSVC_INBOX_DELIVERY_TIMEOUT", "30s", "inbox: how long one delivery to a target may take"},
		{&cfg.inboxOpts.Backoff, "inbox-backoff", "KEYSVC_INBOX_BACKOFF", "1s", "inbox: first redelivery delay, doubled per attempt with jitter"},
		{&cfg.inboxOpts.MaxBackoff, "inbox-max-backoff", "KEYSVC_INBOX_MAX_BACKOFF", "5m", "inbox: longest redelivery delay"},
		{&cfg.inboxOpts.RecoverAfter, "inbox-recover-after", "KEYSVC_INBOX_RECOVER_AFTER", "2m", "inbox: re-enqueue an entry still undelivered after this long"},
		{&cfg.inboxOpts.RescueAfter, "inbox-rescue-after", "KEYSVC_INBOX_RESCUE_AFTER", "15s", "inbox: this keysvc's lease; a delivery in flight in a keysvc that stopped renewing its lease this long ago is sent again by another (at least 5s)"},
	}
	for _, d := range durations {
		v, err := duration.Parse(env(d.env, d.def))
		if err != nil {
			return fmt.Errorf("%s=%q: %v", d.env, os.Getenv(d.env), err)
		}
		duration.Var(fs, d.p, d.name, v, d.usage+", a `DURATION` ("+d.env+")")
	}
	return nil
}

// registerLogsAndInbox registers the log's, the inbox's and the console's
// flags; it returns --endpoints.
func (cfg *config) registerLogsAndInbox(fs *flag.FlagSet) (*string, error) {
	fs.StringVar(&cfg.logLevel, "log-level", env("KEYSVC_LOG_LEVEL", "info"), "debug, info, warn or error (KEYSVC_LOG_LEVEL); warn keeps errors and drops the request lines")
	sample, err := strconv.Atoi(env("KEYSVC_LOG_SAMPLE", "1"))
	if err != nil || sample < 1 {
		return nil, fmt.Errorf("KEYSVC_LOG_SAMPLE=%q: give a whole number of at least 1", os.Getenv("KEYSVC_LOG_SAMPLE"))
	}
	fs.IntVar(&cfg.logSample, "log-sample", sample, "log one request line in `N`; 5xx answers and errors are always logged (KEYSVC_LOG_SAMPLE)")
	endpoints := fs.String("endpoints", env("KEYSVC_ENDPOINTS", ""), "inbox: JSON `file` of the endpoints served at /v1/inbox/{name} (KEYSVC_ENDPOINTS); needs DATABASE_URL")
	fs.StringVar(&cfg.inboxOpts.Schema, "inbox-schema", env("KEYSVC_INBOX_SCHEMA", ""), "inbox: PostgreSQL `schema` of inbox_events and River's tables; the n8n inbox pattern's --db-schema (KEYSVC_INBOX_SCHEMA)")
	fs.StringVar(&cfg.patternSchema, "pattern-schema", env("KEYSVC_PATTERN_SCHEMA", ""), "console: PostgreSQL `schema` of the n8n inbox pattern (its --db-schema) whose events and outbox tasks the console shows and retries; needs DATABASE_URL (KEYSVC_PATTERN_SCHEMA)")
	bodiesDefault, err := envBool("KEYSVC_CONSOLE_BODIES", "true")
	if err != nil {
		return nil, err
	}
	fs.BoolVar(&cfg.consoleBodies, "console-bodies", bodiesDefault, "console: let admin tokens read the inbox's bodies (they may hold personal data); false hides them from everyone (KEYSVC_CONSOLE_BODIES)")
	return endpoints, nil
}

// registerAccess registers the flags of who may call keysvc and how; it
// returns --token-file.
func (cfg *config) registerAccess(fs *flag.FlagSet) *string {
	fs.StringVar(&cfg.tokensFile, "tokens-file", env("KEYSVC_TOKENS_FILE", ""), "`file` of scoped tokens ("+keysvc.ScopeNames()+
		"), one \"name scope sha256 [key-prefix] [provider=NAME]\" a line; re-read on SIGHUP (KEYSVC_TOKENS_FILE)")
	fs.BoolVar(&cfg.insecureNoAuth, "insecure-no-auth", false, "serve a non-loopback address without any token (warned at start and hourly)")
	fs.BoolVar(&cfg.signatureAuth, "signature-auth", false, "accept /v1/keys and /v1/reservations without a token when ?provider= names a provider whose signature verifies")
	fs.BoolVar(&cfg.protectMetrics, "protect-metrics", false, "put /metrics behind the admin scope (default: on a non-loopback address; --protect-metrics=false opens it)")
	fs.Float64Var(&cfg.rateLimit.Rate, "rate-limit", -1, "requests per second per client, 0 for none (default: 100 on a non-loopback address, none on loopback)")
	fs.IntVar(&cfg.rateLimit.Burst, "rate-burst", 0, "burst of the rate limit (default: twice the rate)")
	fs.BoolVar(&cfg.rateLimit.TrustProxy, "trust-proxy", false, "take the client from X-Forwarded-For (behind a reverse proxy)")
	fs.IntVar(&cfg.maxConnsPerClient, "max-conns-per-client", 256, "open connections per client address")
	duration.Var(fs, &cfg.readHeaderTimeout, "read-header-timeout", 5*time.Second, "time to read a request's headers (slow clients are cut), a `DURATION`")
	fs.IntVar(&cfg.maxHeaderBytes, "max-header-bytes", 64<<10, "largest request header block in `bytes`")
	fs.StringVar(&cfg.tlsCert, "tls-cert", env("KEYSVC_TLS_CERT", ""), "certificate `file` to serve HTTPS (and HTTP/2) directly (KEYSVC_TLS_CERT)")
	fs.StringVar(&cfg.tlsKey, "tls-key", env("KEYSVC_TLS_KEY", ""), "private key `file` of --tls-cert (KEYSVC_TLS_KEY)")
	return fs.String("token-file", env("KEYSVC_TOKEN_FILE", ""), "`file` holding the bearer token required on /v1 (KEYSVC_TOKEN_FILE); KEYSVC_TOKEN sets it directly")
}

// read reads what the flags and the environment name: the token, the
// providers' secrets, the endpoints and the tokens file.
func (cfg *config) read(named namedFiles) error {
	cfg.token = os.Getenv("KEYSVC_TOKEN")
	if *named.token != "" {
		b, err := os.ReadFile(*named.token)
		if err != nil {
			return fmt.Errorf("read the token file: %v", err)
		}
		cfg.token = strings.TrimSpace(string(b))
	}
	secrets, err := providerSecrets()
	if err != nil {
		return err
	}
	cfg.secrets = secrets
	if *named.endpoints != "" {
		if cfg.databaseURL == "" {
			return errors.New("the inbox (--endpoints) needs PostgreSQL: set DATABASE_URL")
		}
		if cfg.endpoints, err = inbox.LoadEndpoints(*named.endpoints, secrets); err != nil {
			return err
		}
		cfg.inboxOpts.CreateSchema = cfg.createSchema
	}
	if cfg.patternSchema != "" && cfg.databaseURL == "" {
		return errors.New("--pattern-schema shows the n8n inbox pattern's tables: it needs PostgreSQL (DATABASE_URL)")
	}
	if cfg.tokensFile != "" {
		if cfg.tokens, err = readTokens(cfg.tokensFile); err != nil {
			return err
		}
	}
	return nil
}

// check refuses values keysvc cannot serve with, and sets the rate limit's
// default, which depends on the address.
func (cfg *config) check() error {
	if _, port, err := net.SplitHostPort(cfg.addr); err != nil || port == "" {
		return fmt.Errorf("--addr %q: want HOST:PORT, such as 127.0.0.1:8080, or :8080 for every address", cfg.addr)
	}
	if dir := filepath.Dir(cfg.dbFile); cfg.databaseURL == "" && !isDir(dir) {
		return fmt.Errorf("--db-file %s: the folder %s does not exist: create it, or give a file in a folder that does (or DATABASE_URL for PostgreSQL)", cfg.dbFile, dir)
	}
	public := !loopback(cfg.addr)
	if public && cfg.token == "" && cfg.tokens.Len() == 0 && !cfg.insecureNoAuth {
		return fmt.Errorf("refusing to serve %s without a token: anyone who reaches it could release a processed event's key "+
			"or reserve a real event id first. Set KEYSVC_TOKEN (or --token-file), or --tokens-file with scoped tokens; "+
			"or listen on 127.0.0.1; or, knowing this, pass --insecure-no-auth", cfg.addr)
	}
	if cfg.rateLimit.Rate < 0 {
		cfg.rateLimit.Rate = 0
		if public {
			cfg.rateLimit.Rate = 100
		}
	}
	// /metrics tells who calls keysvc how often: closed on a public
	// address unless asked open.
	if public && !slices.Contains(cfg.given, "protect-metrics") {
		cfg.protectMetrics = true
	}
	switch {
	case (cfg.tlsCert == "") != (cfg.tlsKey == ""):
		return errors.New("--tls-cert and --tls-key go together")
	case cfg.maxConnsPerClient < 1 || cfg.readHeaderTimeout <= 0 || cfg.maxHeaderBytes < 4096:
		return errors.New("--max-conns-per-client must be at least 1, --read-header-timeout positive, --max-header-bytes at least 4096")
	case cfg.logSample < 1:
		return errors.New("--log-sample must be at least 1")
	case cfg.maxBody <= 0 || cfg.readTimeout <= 0 || cfg.writeTimeout <= 0 || cfg.retention < 0:
		return errors.New("--max-body and the timeouts must be positive, --retention zero or positive")
	}
	return nil
}

// envBool is the boolean in environment variable name, or def.
func envBool(name, def string) (bool, error) {
	b, err := strconv.ParseBool(env(name, def))
	if err != nil {
		return false, fmt.Errorf("%s=%q: use true or false", name, os.Getenv(name))
	}
	return b, nil
}

// providerSecrets reads each provider's signing secrets from
// KEYSVC_SECRET_<PROVIDER> (one secret) and KEYSVC_SECRET_<PROVIDER>_FILE
// (one secret per line, for rotations). For standardwebhooks a line is a
// whsec_ secret or a whpk_ public key. A file that cannot be read, or a
// secret of the wrong form (signature.Provider.CheckSecrets), fails, naming
// the variable and the secret's position but never its value.
func providerSecrets() (map[signature.Provider][]string, error) {
	out := map[signature.Provider][]string{}
	for _, p := range signature.Providers {
		name := "KEYSVC_SECRET_" + strings.ToUpper(string(p))
		if v := strings.TrimSpace(os.Getenv(name)); v != "" {
			out[p] = append(out[p], v)
		}
		if file := os.Getenv(name + "_FILE"); file != "" {
			b, err := os.ReadFile(file)
			if err != nil {
				return nil, fmt.Errorf("%s_FILE: %w", name, err)
			}
			for _, line := range strings.Split(string(b), "\n") {
				if line = strings.TrimSpace(line); line != "" {
					out[p] = append(out[p], line)
				}
			}
		}
		if len(out[p]) > 0 {
			if err := p.CheckSecrets(out[p]); err != nil {
				return nil, fmt.Errorf("%s, then the lines of %s_FILE: %w", name, name, err)
			}
		}
	}
	return out, nil
}

// env returns the value of name, or def.
func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// isDir reports whether path is a folder.
func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// loopback reports whether addr listens on loopback only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func readTokens(path string) (*keysvc.Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	defer f.Close()
	return keysvc.ParseTokens(f)
}
