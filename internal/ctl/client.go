package ctl

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// Do sends req to the daemon listening on the unix socket at path and
// returns its answer. The exchange is bounded by ctx, and by
// DefaultTimeout when ctx has no deadline.
func Do(ctx context.Context, path string, req Request) (Response, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return Response{}, fmt.Errorf("connect to ctl socket %s: %w", path, err)
	}
	defer c.Close()
	dl, _ := ctx.Deadline()
	_ = c.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	b, err := json.Marshal(req)
	if err != nil {
		return Response{}, fmt.Errorf("ctl request %q: %w", req.Command, err)
	}
	// A server that refuses the peer answers before it reads the request
	// and closes: the write may then fail (broken pipe) with the refusal
	// waiting to be read, which is the answer the operator needs.
	_, werr := c.Write(append(b, '\n'))
	r := bufio.NewReaderSize(c, 64<<10)
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxLine {
			return Response{}, fmt.Errorf("ctl answer to %q from %s: longer than %d bytes", req.Command, path, maxLine)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && len(line) == 0 {
			if werr != nil {
				return Response{}, fmt.Errorf("ctl request %q to %s: %w", req.Command, path, werr)
			}
			return Response{}, fmt.Errorf("ctl answer to %q from %s: %w", req.Command, path, err)
		}
		break
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		return Response{}, fmt.Errorf("ctl answer to %q from %s: %w", req.Command, path, err)
	}
	return resp, nil
}
