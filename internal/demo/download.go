package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// workerURL finds the worker downloads a launched script makes: the API's
// /download/worker/<os>/<arch> URLs, once `$(uname -m)` is expanded.
var workerURL = regexp.MustCompile(`https?://[^\s"'\\]+/download/worker/[^\s"'\\;&|]+`)

// unameM is what `uname -m` answers in the demo's guests.
const unameM = "x86_64"

// errNoDownload: the script downloads no worker.
var errNoDownload = errors.New("the script downloads no worker")

// fetchWorker plays a worker script's download of the worker as the
// guest's shell would (docs/configuration.md, "V2 commands"): every worker
// URL the script names is fetched from the API; one that does not answer
// 200 fails the launch, as a real guest then has no worker to start. It
// returns the URLs fetched, or errNoDownload when the script names none
// (a model whose template has the worker installed).
func fetchWorker(ctx context.Context, script string) ([]string, error) {
	var urls []string
	for _, u := range workerURL.FindAllString(strings.ReplaceAll(script, "$(uname -m)", unameM), -1) {
		if !slices.Contains(urls, u) { // a fallback (wget after curl) fetches the same URL
			urls = append(urls, u)
		}
	}
	if len(urls) == 0 {
		return nil, errNoDownload
	}
	for _, u := range urls {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return urls, fmt.Errorf("download worker from %s: %w", u, err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return urls, fmt.Errorf("download worker from %s: %w", u, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return urls, fmt.Errorf("download worker from %s: status %d", u, resp.StatusCode)
		}
	}
	return urls, nil
}
