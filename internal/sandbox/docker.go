package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/idemhook/idemhook/internal/communitynode"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/testcontainers/testcontainers-go"
	tcexec "github.com/testcontainers/testcontainers-go/exec"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"
)

// dockerRuntime runs the official images: postgres:PostgresMajor and
// n8nio/n8n:N8NVersion, on a private network, as docker-compose.yml does.
type dockerRuntime struct {
	net    *testcontainers.DockerNetwork
	pg     testcontainers.Container
	n8n    testcontainers.Container
	logDir string
}

func startDocker(ctx context.Context, opts Options) (s *Stack, err error) {
	if opts.Queue {
		return nil, errors.New("queue mode runs on the local runtime only (IDEMHOOK_RUNTIME=local)")
	}
	logDir, err := os.MkdirTemp("", "idemhook-sandbox-logs-")
	if err != nil {
		return nil, err
	}
	rt := &dockerRuntime{logDir: logDir}
	defer func() {
		if err != nil {
			rt.close()
		}
	}()
	if rt.net, err = network.New(ctx); err != nil {
		return nil, fmt.Errorf("docker network: %w", err)
	}
	hostDSN, err := rt.startPostgresContainer(ctx, opts)
	if err != nil {
		return nil, err
	}

	s = &Stack{Runtime: "docker", LogDir: logDir, rt: rt,
		BusinessDSN: hostDSN(BusinessDatabase), pgForN8N: pgTarget{Host: "postgres", Port: 5432, Database: BusinessDatabase, User: pgUser, Password: pgPassword}}
	if s.Business, err = pgxpool.New(ctx, s.BusinessDSN); err != nil {
		return nil, err
	}
	if s.N8NDB, err = pgxpool.New(ctx, hostDSN(n8nDatabase)); err != nil {
		s.Business.Close()
		return nil, err
	}
	if opts.PostgresOnly {
		return s, nil
	}
	defer func() {
		if err != nil {
			s.Business.Close()
			s.N8NDB.Close()
		}
	}()
	if s.N8NURL, err = rt.startN8NContainer(ctx, opts); err != nil {
		return nil, err
	}
	s.WebhookURL = s.N8NURL
	return s, nil
}

// startPostgresContainer starts the postgres image on the network, as
// "postgres", and creates n8n's database beside the business one; hostDSN
// is the URL of one of its databases from the host.
func (rt *dockerRuntime) startPostgresContainer(ctx context.Context, opts Options) (hostDSN func(db string) string, err error) {
	rt.pg, err = testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{Started: true,
		ContainerRequest: testcontainers.ContainerRequest{
			Image:          "postgres:" + opts.PostgresMajor,
			Cmd:            postgresCommand(opts.Durable),
			Env:            map[string]string{"POSTGRES_USER": pgUser, "POSTGRES_PASSWORD": pgPassword, "POSTGRES_DB": BusinessDatabase},
			ExposedPorts:   []string{"5432/tcp"},
			Networks:       []string{rt.net.Name},
			NetworkAliases: map[string][]string{rt.net.Name: {"postgres"}},
			WaitingFor:     wait.ForLog("database system is ready to accept connections").WithOccurrence(2).WithStartupTimeout(2 * time.Minute),
		}})
	if err != nil {
		return nil, fmt.Errorf("start postgres:%s: %w", opts.PostgresMajor, err)
	}
	host, err := rt.pg.Host(ctx)
	if err != nil {
		return nil, err
	}
	port, err := rt.pg.MappedPort(ctx, "5432/tcp")
	if err != nil {
		return nil, err
	}
	hostDSN = func(db string) string {
		return fmt.Sprintf("postgres://%s:%s@%s:%s/%s?sslmode=disable", pgUser, pgPassword, host, port.Port(), db)
	}
	if err := createDatabases(ctx, hostDSN("postgres"), n8nDatabase); err != nil {
		return nil, err
	}
	return hostDSN, nil
}

// startN8NContainer starts the n8nio/n8n image on the network, on the
// postgres container's n8n database (with the community node when opts
// asks for it), and returns its base URL from the host.
func (rt *dockerRuntime) startN8NContainer(ctx context.Context, opts Options) (string, error) {
	env := n8nContainerEnv(opts.N8NEnv)
	var files []testcontainers.ContainerFile
	if opts.CommunityNode {
		// Installed on the host as n8n installs it, then copied into the
		// image's user folder.
		nodes, err := hostCommunityNode(ctx, rt.logDir, opts)
		if err != nil {
			return "", err
		}
		files = append(files, testcontainers.ContainerFile{HostFilePath: nodes, ContainerFilePath: "/home/node/.n8n/nodes", FileMode: 0o755})
	}
	var err error
	rt.n8n, err = testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{Started: true,
		ContainerRequest: testcontainers.ContainerRequest{
			Image:        "n8nio/n8n:" + N8NVersion,
			Env:          env,
			Files:        files,
			ExposedPorts: []string{"5678/tcp"},
			Networks:     []string{rt.net.Name},
			WaitingFor:   wait.ForHTTP("/healthz/readiness").WithPort("5678/tcp").WithStartupTimeout(3 * time.Minute),
		}})
	if err != nil {
		return "", fmt.Errorf("start n8nio/n8n:%s: %w", N8NVersion, err)
	}
	n8nHost, err := rt.n8n.Host(ctx)
	if err != nil {
		return "", err
	}
	n8nPort, err := rt.n8n.MappedPort(ctx, "5678/tcp")
	if err != nil {
		return "", err
	}
	return "http://" + n8nHost + ":" + n8nPort.Port(), nil
}

// n8nContainerEnv is the n8n container's environment: its database and
// encryption key, then extra where it names other variables, then the
// stack's settings.
func n8nContainerEnv(extra map[string]string) map[string]string {
	env := map[string]string{
		"DB_TYPE":                "postgresdb",
		"DB_POSTGRESDB_HOST":     "postgres",
		"DB_POSTGRESDB_PORT":     "5432",
		"DB_POSTGRESDB_DATABASE": n8nDatabase,
		"DB_POSTGRESDB_USER":     pgUser,
		"DB_POSTGRESDB_PASSWORD": pgPassword,
		"N8N_ENCRYPTION_KEY":     "idemhook-sandbox-only-key",
	}
	for k, v := range extra {
		if _, ours := env[k]; !ours {
			env[k] = v
		}
	}
	maps.Copy(env, n8nStackSettings)
	maps.Copy(env, N8NSettings)
	return env
}

func (rt *dockerRuntime) n8nCLI(ctx context.Context, args ...string) ([]byte, error) {
	if rt.n8n == nil {
		return nil, errors.New("this stack runs PostgreSQL only")
	}
	// The server's task broker holds port 5679 in the container.
	code, r, err := rt.n8n.Exec(ctx, append([]string{"n8n"}, args...), tcexec.Multiplexed(),
		tcexec.WithEnv([]string{"N8N_RUNNERS_BROKER_PORT=5680"}))
	if err != nil {
		return nil, err
	}
	out, _ := io.ReadAll(r)
	if code != 0 {
		return out, fmt.Errorf("exit status %d", code)
	}
	return out, nil
}

func (rt *dockerRuntime) stage(ctx context.Context, hostPath string) (string, error) {
	if rt.n8n == nil {
		return "", errors.New("this stack runs PostgreSQL only")
	}
	dst := "/tmp/" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + filepath.Base(hostPath)
	if err := rt.n8n.CopyFileToContainer(ctx, hostPath, dst, 0o644); err != nil {
		return "", fmt.Errorf("copy %s into the n8n container: %w", hostPath, err)
	}
	return dst, nil
}

func (rt *dockerRuntime) nodeTypes(ctx context.Context) ([]byte, error) {
	if rt.n8n == nil {
		return nil, errors.New("this stack runs PostgreSQL only")
	}
	code, r, err := rt.n8n.Exec(ctx, []string{"sh", "-c", "cat $(find /home/node -path '*types/nodes.json' | head -n 1)"}, tcexec.Multiplexed())
	if err != nil {
		return nil, err
	}
	out, _ := io.ReadAll(r)
	if code != 0 {
		return nil, fmt.Errorf("read types/nodes.json in the n8n container: exit status %d", code)
	}
	return out, nil
}

func (rt *dockerRuntime) logs() []string {
	return []string{filepath.Join(rt.logDir, "n8n.log"), filepath.Join(rt.logDir, "postgres.log")}
}

func (rt *dockerRuntime) folder() string { return rt.logDir }

// unexpectedExits is empty: a container's exit is in the logs saved at close.
func (rt *dockerRuntime) unexpectedExits() []string { return nil }

// revive has nothing to do: exits are not watched (unexpectedExits).
func (rt *dockerRuntime) revive(context.Context) error { return nil }

// saveLogs copies a container's output into logDir before it is removed.
func (rt *dockerRuntime) saveLogs(c testcontainers.Container, name string) {
	if c == nil {
		return
	}
	r, err := c.Logs(context.Background())
	if err != nil {
		return
	}
	defer r.Close()
	if f, err := os.Create(filepath.Join(rt.logDir, name+".log")); err == nil {
		_, _ = io.Copy(f, r)
		f.Close()
	}
}

func (rt *dockerRuntime) close() error {
	rt.saveLogs(rt.n8n, "n8n")
	rt.saveLogs(rt.pg, "postgres")
	for _, c := range []testcontainers.Container{rt.n8n, rt.pg} {
		if c != nil {
			_ = testcontainers.TerminateContainer(c)
		}
	}
	if rt.net != nil {
		_ = rt.net.Remove(context.Background())
	}
	return nil
}

// killN8N stops the n8n container without a grace period (SIGKILL).
func (rt *dockerRuntime) killN8N(ctx context.Context) error {
	if rt.n8n == nil {
		return errors.New("this stack runs PostgreSQL only")
	}
	zero := time.Duration(0)
	return rt.n8n.Stop(ctx, &zero)
}

// startN8N starts the stopped n8n container again; its mapped port may change.
func (rt *dockerRuntime) startN8N(ctx context.Context) (string, error) {
	if rt.n8n == nil {
		return "", errors.New("this stack runs PostgreSQL only")
	}
	if err := rt.n8n.Start(ctx); err != nil {
		return "", err
	}
	host, err := rt.n8n.Host(ctx)
	if err != nil {
		return "", err
	}
	port, err := rt.n8n.MappedPort(ctx, "5678/tcp")
	if err != nil {
		return "", err
	}
	return "http://" + host + ":" + port.Port(), nil
}

// postgresCommand runs the image's postgres with the stack's settings.
func postgresCommand(durable bool) []string {
	cmd := []string{"postgres"}
	for _, kv := range postgresSettings(durable, PostgresMajor) {
		cmd = append(cmd, "-c", kv)
	}
	return cmd
}

// stopPostgres stops the PostgreSQL container without a grace period, and
// resumePostgres starts it again; its mapped port may change, which the
// caller's DSN does not follow (the docker runtime runs this only for tests
// that take it into account).
func (rt *dockerRuntime) stopPostgres(ctx context.Context) error {
	zero := time.Duration(0)
	return rt.pg.Stop(ctx, &zero)
}

func (rt *dockerRuntime) resumePostgres(ctx context.Context) error { return rt.pg.Start(ctx) }

func (rt *dockerRuntime) killWorker(context.Context, int) error {
	return errors.New("queue mode runs on the local runtime only")
}

func (rt *dockerRuntime) startWorker(context.Context, int) error {
	return errors.New("queue mode runs on the local runtime only")
}

// hostCommunityNode installs the community node package into a folder of
// dir and returns its .n8n/nodes folder, to copy into the container.
func hostCommunityNode(ctx context.Context, dir string, opts Options) (string, error) {
	in, err := Provision(ctx, Needs{CommunityNode: opts.CommunityNodePackage == "", Why: opts.Why}, opts.Progress)
	if err != nil {
		return "", err
	}
	user := filepath.Join(dir, "n8n-user")
	tarballs := in.CommunityNodes
	if opts.CommunityNodePackage != "" {
		tarballs = []string{opts.CommunityNodePackage}
	}
	if err := communitynode.Install(ctx, in.NodeBin, user, tarballs...); err != nil {
		return "", err
	}
	return filepath.Join(user, ".n8n", "nodes"), nil
}
