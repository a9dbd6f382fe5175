package realflux

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxfed/fluxfed/member/render/workload"
)

//go:embed sandbox.sh
var sandboxScript []byte

// podEnvKey marks every process of a pod's containers (in its environment, which the processes
// it starts inherit), so that what is left of a pod can be found and ended.
const podEnvKey = "FLUXFED_REALFLUX_POD"

// defaultPath is the PATH of a container whose spec sets none (Debian's).
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// maxMessage is the longest termination message a kubelet keeps.
const maxMessage = 4096

// pod is a simulated pod whose containers run for real on this machine.
type pod struct {
	r    *Runner
	name types.NamespacedName
	uid  types.UID
	// id numbers the pod in the runner's directory: short paths keep unix sockets usable.
	id       int
	dir      string
	address  string
	hostname string
	spec     corev1.PodSpec
	meta     corev1.Pod
	// main is the container whose end ends the pod.
	main string

	mu sync.Mutex
	// running holds the containers' processes while they run.
	running map[string]*exec.Cmd
	// stopping is set once the pod is being deleted.
	stopping bool
	// ended is closed once the pod's main container ended and what it ended with was reported.
	ended chan struct{}
}

// volumeDir is where the pod's volume name is on this machine.
func (p *pod) volumeDir(name string) string { return filepath.Join(p.dir, "vol", name) }

// socket is the path, on this machine, of the local socket of the pod's broker: view/run/flux/
// local in its flux view volume (the renderer's -Slocal-uri).
func (p *pod) socket() string {
	return filepath.Join(p.volumeDir(workload.VolumeView), "view", "run", "flux", "local")
}

// materialize writes the pod's volumes: emptyDirs empty, ConfigMaps and Secrets as a kubelet
// projects them (each key a file, or the items asked for, with the mode asked for).
func (p *pod) materialize(ctx context.Context) error {
	for _, v := range p.spec.Volumes {
		dir := p.volumeDir(v.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		switch {
		case v.EmptyDir != nil:
		case v.ConfigMap != nil:
			cm := &corev1.ConfigMap{}
			if err := p.r.client.Get(ctx, client.ObjectKey{Namespace: p.name.Namespace, Name: v.ConfigMap.Name}, cm); err != nil {
				return fmt.Errorf("volume %s: ConfigMap %s: %w", v.Name, v.ConfigMap.Name, err)
			}
			data := map[string][]byte{}
			for k, s := range cm.Data {
				data[k] = []byte(s)
			}
			for k, b := range cm.BinaryData {
				data[k] = b
			}
			if err := project(dir, data, v.ConfigMap.Items, v.ConfigMap.DefaultMode); err != nil {
				return fmt.Errorf("volume %s: %w", v.Name, err)
			}
		case v.Secret != nil:
			s := &corev1.Secret{}
			if err := p.r.client.Get(ctx, client.ObjectKey{Namespace: p.name.Namespace, Name: v.Secret.SecretName}, s); err != nil {
				return fmt.Errorf("volume %s: Secret %s: %w", v.Name, v.Secret.SecretName, err)
			}
			if err := project(dir, s.Data, v.Secret.Items, v.Secret.DefaultMode); err != nil {
				return fmt.Errorf("volume %s: %w", v.Name, err)
			}
		default:
			return fmt.Errorf("volume %s: only emptyDir, configMap and secret volumes run here", v.Name)
		}
	}
	return nil
}

// project writes data into dir as a kubelet projects a ConfigMap or Secret: every key, or the
// items given, with mode (0644 when unset).
func project(dir string, data map[string][]byte, items []corev1.KeyToPath, defaultMode *int32) error {
	mode := os.FileMode(0o644)
	if defaultMode != nil {
		mode = os.FileMode(*defaultMode)
	}
	files := map[string]os.FileMode{}
	paths := map[string]string{}
	if len(items) == 0 {
		for k := range data {
			paths[k], files[k] = k, mode
		}
	}
	for _, it := range items {
		paths[it.Key], files[it.Key] = it.Path, mode
		if it.Mode != nil {
			files[it.Key] = os.FileMode(*it.Mode)
		}
	}
	for k, path := range paths {
		b, ok := data[k]
		if !ok {
			return fmt.Errorf("no key %q", k)
		}
		target := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(target, b, files[k]); err != nil {
			return err
		}
		if err := os.Chmod(target, files[k]); err != nil {
			return err
		}
	}
	return nil
}

// env is the environment of container c, as a kubelet makes it: its env and envFrom resolved
// against the pod, the PATH and HOSTNAME of a container, and the eth0 shim with the pod's
// address.
func (p *pod) env(ctx context.Context, c corev1.Container) ([]string, error) {
	vars := map[string]string{"PATH": defaultPath, "HOSTNAME": p.hostname, "HOME": "/root"}
	for _, from := range c.EnvFrom {
		var data map[string]string
		switch {
		case from.ConfigMapRef != nil:
			cm := &corev1.ConfigMap{}
			if err := p.r.client.Get(ctx, client.ObjectKey{Namespace: p.name.Namespace, Name: from.ConfigMapRef.Name}, cm); err != nil {
				return nil, fmt.Errorf("envFrom ConfigMap %s: %w", from.ConfigMapRef.Name, err)
			}
			data = cm.Data
		case from.SecretRef != nil:
			s := &corev1.Secret{}
			if err := p.r.client.Get(ctx, client.ObjectKey{Namespace: p.name.Namespace, Name: from.SecretRef.Name}, s); err != nil {
				return nil, fmt.Errorf("envFrom Secret %s: %w", from.SecretRef.Name, err)
			}
			data = map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
		for k, v := range data {
			vars[from.Prefix+k] = v
		}
	}
	for _, e := range c.Env {
		v, err := p.value(ctx, e)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		vars[e.Name] = v
	}
	vars["LD_PRELOAD"] = p.r.shim
	vars["FLUXFED_ETH0"] = p.address
	vars[podEnvKey] = p.r.token + "/" + strconv.Itoa(p.id)
	// The sandbox binds the flux-core cache (the installation and the shim) at its own path.
	vars["FLUXFED_SANDBOX_BIND"] = p.r.cacheRoot
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out, nil
}

// value resolves one env entry of a container of the pod.
func (p *pod) value(ctx context.Context, e corev1.EnvVar) (string, error) {
	if e.ValueFrom == nil {
		return e.Value, nil
	}
	switch f := e.ValueFrom; {
	case f.FieldRef != nil:
		path := f.FieldRef.FieldPath
		switch {
		case path == "metadata.name":
			return p.name.Name, nil
		case path == "metadata.namespace":
			return p.name.Namespace, nil
		case path == "metadata.uid":
			return string(p.uid), nil
		case path == "spec.nodeName":
			return p.spec.NodeName, nil
		case path == "status.podIP":
			return p.meta.Status.PodIP, nil
		case strings.HasPrefix(path, "metadata.annotations['") && strings.HasSuffix(path, "']"):
			return p.meta.Annotations[strings.TrimSuffix(strings.TrimPrefix(path, "metadata.annotations['"), "']")], nil
		case strings.HasPrefix(path, "metadata.labels['") && strings.HasSuffix(path, "']"):
			return p.meta.Labels[strings.TrimSuffix(strings.TrimPrefix(path, "metadata.labels['"), "']")], nil
		}
		return "", fmt.Errorf("field %s is not resolved here", path)
	case f.ConfigMapKeyRef != nil:
		cm := &corev1.ConfigMap{}
		if err := p.r.client.Get(ctx, client.ObjectKey{Namespace: p.name.Namespace, Name: f.ConfigMapKeyRef.Name}, cm); err != nil {
			return "", err
		}
		return cm.Data[f.ConfigMapKeyRef.Key], nil
	case f.SecretKeyRef != nil:
		s := &corev1.Secret{}
		if err := p.r.client.Get(ctx, client.ObjectKey{Namespace: p.name.Namespace, Name: f.SecretKeyRef.Name}, s); err != nil {
			return "", err
		}
		return string(s.Data[f.SecretKeyRef.Key]), nil
	}
	return "", errors.New("only value, fieldRef, configMapKeyRef and secretKeyRef are resolved here")
}

// command returns the process that runs container c of the pod, in its sandbox: its own host
// name and mount namespace (unshare, which then runs the sandbox script in it: the process is
// the container's main process once the script is done), the pod's volumes, /etc/hosts of the
// pod's cluster, and, for init containers, the flux view image's /opt/view.
func (p *pod) command(ctx context.Context, c corev1.Container, init bool) (*exec.Cmd, error) {
	if len(c.Command) == 0 {
		return nil, fmt.Errorf("container %s has no command: there is no image here to take an entrypoint from", c.Name)
	}
	env, err := p.env(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", c.Name, err)
	}
	root := filepath.Join(p.dir, "root-"+c.Name)
	termlog := filepath.Join(p.dir, c.Name+".termination-log")
	for _, path := range []string{root} {
		if err := os.MkdirAll(path, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(termlog, nil, 0o644); err != nil {
		return nil, err
	}
	workdir := c.WorkingDir
	if workdir == "" {
		workdir = "/"
	}
	args := []string{"--uts", "--mount", "sh", p.r.sandbox, root, p.hostname, p.r.hostsFile, termlog, workdir}
	for _, m := range c.VolumeMounts {
		src := p.volumeDir(m.Name)
		if m.SubPath != "" {
			src = filepath.Join(src, m.SubPath)
		}
		spec := src + ":" + m.MountPath
		if m.ReadOnly {
			spec += ":ro"
		}
		args = append(args, "-m", spec)
	}
	if init {
		args = append(args, "-m", p.r.view+":/opt/view:ro")
	}
	args = append(args, "--")
	args = append(args, c.Command...)
	args = append(args, c.Args...)
	cmd := exec.Command("unshare", args...)
	cmd.Env = env
	log, err := os.OpenFile(filepath.Join(p.dir, c.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, and killed if the runner dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd, nil
}

// run runs the pod: its init containers one after another, then its containers; it returns when
// the main container ended, with its exit code and termination message.
func (p *pod) run(ctx context.Context) (int, string) {
	if err := p.materialize(ctx); err != nil {
		return 1, "fluxfed e2e: " + err.Error()
	}
	for _, c := range p.spec.InitContainers {
		code, msg := p.runContainer(ctx, c, true)
		if code != 0 {
			return code, fmt.Sprintf("init container %s: %s", c.Name, msg)
		}
		if p.isStopping() {
			return code, msg
		}
	}
	var wg sync.WaitGroup
	var code int
	var msg string
	mainDone := make(chan struct{})
	for _, c := range p.spec.Containers {
		wg.Go(func() {
			cc, cm := p.runContainer(ctx, c, false)
			if c.Name == p.main {
				code, msg = cc, cm
				close(mainDone)
			}
		})
	}
	<-mainDone
	// The pod ends with its main container: the others are stopped, as the pod's end stops them.
	p.killAll(syscall.SIGKILL)
	wg.Wait()
	return code, msg
}

func (p *pod) isStopping() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopping
}

// runContainer runs container c to its end and returns its exit code and termination message.
func (p *pod) runContainer(ctx context.Context, c corev1.Container, init bool) (int, string) {
	cmd, err := p.command(ctx, c, init)
	if err != nil {
		return 1, "fluxfed e2e: " + err.Error()
	}
	p.mu.Lock()
	if p.stopping {
		p.mu.Unlock()
		return 143, ""
	}
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		return 1, "fluxfed e2e: starting container " + c.Name + ": " + err.Error()
	}
	p.running[c.Name] = cmd
	p.mu.Unlock()
	err = cmd.Wait()
	p.mu.Lock()
	delete(p.running, c.Name)
	p.mu.Unlock()
	code := exitCode(cmd, err)
	return code, p.message(c, code)
}

// exitCode is how a container runtime reports the end of the process: its exit status, or
// 128 plus the signal that ended it.
func exitCode(cmd *exec.Cmd, err error) int {
	if cmd.ProcessState == nil {
		return 1
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	if err != nil && cmd.ProcessState.ExitCode() < 0 {
		return 1
	}
	return cmd.ProcessState.ExitCode()
}

// message is container c's termination message: what it wrote to its termination log or, with
// terminationMessagePolicy FallbackToLogsOnError and a failure, the end of its log.
func (p *pod) message(c corev1.Container, code int) string {
	data, _ := os.ReadFile(filepath.Join(p.dir, c.Name+".termination-log"))
	msg := string(data)
	if msg == "" && code != 0 && c.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
		log, _ := os.ReadFile(filepath.Join(p.dir, c.Name+".log"))
		lines := strings.Split(strings.TrimRight(string(log), "\n"), "\n")
		msg = strings.Join(lines[max(0, len(lines)-80):], "\n")
		if len(msg) > 2048 {
			msg = msg[len(msg)-2048:]
		}
	}
	if len(msg) > maxMessage {
		msg = msg[:maxMessage]
	}
	return msg
}

// stop ends the pod as a kubelet ends a deleted pod: SIGTERM to each container's main process,
// and after the pod's grace period SIGKILL to everything left of it.
func (p *pod) stop() {
	p.mu.Lock()
	if p.stopping {
		p.mu.Unlock()
		return
	}
	p.stopping = true
	for _, cmd := range p.running {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	p.mu.Unlock()
	grace := 30 * time.Second
	if p.spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*p.spec.TerminationGracePeriodSeconds) * time.Second
	}
	select {
	case <-p.ended:
	case <-time.After(grace):
		p.killAll(syscall.SIGKILL)
	}
}

// killAll signals every process of the pod: its containers' process groups, and every process
// that carries the pod's mark in its environment (a job's tasks run in process groups of their
// own), as a runtime kills a container's cgroup.
func (p *pod) killAll(sig syscall.Signal) {
	p.mu.Lock()
	for _, cmd := range p.running {
		_ = syscall.Kill(-cmd.Process.Pid, sig)
	}
	p.mu.Unlock()
	for _, pid := range p.processes() {
		_ = syscall.Kill(pid, sig)
	}
}

// processes returns the processes that carry the pod's mark in their environment: every process
// of its containers.
func (p *pod) processes() []int {
	mark := []byte(podEnvKey + "=" + p.r.token + "/" + strconv.Itoa(p.id) + "\x00")
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && containsEnv(data, mark) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func containsEnv(environ, entry []byte) bool {
	return strings.HasPrefix(string(environ), string(entry)) || strings.Contains(string(environ), "\x00"+string(entry))
}
