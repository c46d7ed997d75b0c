package vcenter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEndpointURL(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		wantErr        bool
	}{
		{name: "host", in: "vc.example.com", want: "https://vc.example.com/sdk"},
		{name: "host:port", in: "vc.example.com:8443", want: "https://vc.example.com:8443/sdk"},
		{name: "url", in: "https://vc.example.com/sdk", want: "https://vc.example.com/sdk"},
		{name: "url without path", in: "https://10.0.0.1/", want: "https://10.0.0.1/sdk"},
		{name: "user info dropped", in: "https://u:p%40ss@vc/sdk", want: "https://vc/sdk"},
		{name: "empty", in: " ", wantErr: true},
		{name: "scheme", in: "ftp://vc", wantErr: true},
		{name: "unparseable", in: "https://u:secret@[::1", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := endpointURL(tc.in)
			if tc.wantErr {
				require.Error(t, err)
				assert.NotContains(t, err.Error(), "secret")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, u.String())
		})
	}
}

func TestTaskSlotsBoundConcurrency(t *testing.T) {
	c := &Client{sem: make(chan struct{}, 1)}
	release, err := c.acquire(context.Background())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = c.acquire(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the only slot is taken")
	release()
	release2, err := c.acquire(context.Background())
	require.NoError(t, err)
	release2()

	unbounded := &Client{}
	for range 3 {
		r, err := unbounded.acquire(context.Background())
		require.NoError(t, err)
		defer r()
	}
}

func TestSOAPMethodName(t *testing.T) {
	assert.Equal(t, "unknown", soapMethodFrom(context.Background()))
	assert.Equal(t, "X", soapMethodFrom(withSOAPMethod(context.Background(), "X")))
}
