package rie

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Build compiles the main package pkg (a path such as "./functions/payments-api", relative
// to the module root dir) for linux/goarch exactly as the Makefile's build targets do, into
// outDir/bootstrap, and returns that path.
func Build(ctx context.Context, dir, pkg, goarch, outDir string) (string, error) {
	out := filepath.Join(outDir, "bootstrap")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+goarch, "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("rie: build %s for %s: %w\n%s", pkg, goarch, err, strings.TrimSpace(string(b)))
	}
	return out, nil
}

// ModuleRoot returns the directory holding go.mod, searching up from dir.
func ModuleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("rie: no go.mod above %s", dir)
		}
		dir = parent
	}
}
