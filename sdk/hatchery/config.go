package hatchery

// CommonConfiguration is the block shared by every CDS hatchery,
// [hatchery.vsphere.commonConfiguration] in TOML. Defaults live in
// DefaultCommonConfiguration; durations given in seconds are converted by
// the accessor methods.
type CommonConfiguration struct {
	Name          string          `mapstructure:"name" toml:"name" json:"name"`
	URL           string          `mapstructure:"url" toml:"url" json:"url"`
	RSAPrivateKey string          `mapstructure:"rsaPrivateKey" toml:"rsaPrivateKey" json:"-"`
	HTTP          HTTPConfig      `mapstructure:"http" toml:"http" json:"http"`
	API           APIConfig       `mapstructure:"api" toml:"api" json:"api"`
	CDN           CDNConfig       `mapstructure:"cdn" toml:"cdn" json:"cdn"`
	Provision     ProvisionConfig `mapstructure:"provision" toml:"provision" json:"provision"`
}

// HTTPConfig is where the hatchery serves /mon/*.
type HTTPConfig struct {
	Addr string `mapstructure:"addr" toml:"addr" json:"addr"`
	Port int    `mapstructure:"port" toml:"port" json:"port"`
}

// HTTPClientConfig is a URL to reach, with TLS verification optionally off.
type HTTPClientConfig struct {
	URL      string `mapstructure:"url" toml:"url" json:"url"`
	Insecure bool   `mapstructure:"insecure" toml:"insecure" json:"insecure"`
}

// APIConfig is how the hatchery reaches the CDS API.
type APIConfig struct {
	HTTP    HTTPClientConfig `mapstructure:"http" toml:"http" json:"http"`
	Token   string           `mapstructure:"token" toml:"token" json:"-"`
	TokenV2 string           `mapstructure:"tokenV2" toml:"tokenV2" json:"-"`
	// RequestTimeout is in seconds.
	RequestTimeout       int `mapstructure:"requestTimeout" toml:"requestTimeout" json:"requestTimeout"`
	MaxHeartbeatFailures int `mapstructure:"maxHeartbeatFailures" toml:"maxHeartbeatFailures" json:"maxHeartbeatFailures"`
}

// CDNConfig is where workers reach the CDN; each empty address is asked
// from the API at start (GET /config/cdn, or /v2/config/cdn for a V2-only
// hatchery). The hatchery itself sends nothing to the CDN: these are the
// workers' addresses.
type CDNConfig struct {
	// URL is the CDN's HTTP URL (the worker's cdn_endpoint).
	URL string `mapstructure:"url" toml:"url" json:"url"`
	// TCP is the CDN's TCP log address (the worker's gelf_service_addr).
	TCP CDNTCPConfig `mapstructure:"tcp" toml:"tcp" json:"tcp"`
}

// CDNTCPConfig is the CDN's TCP address workers send their step logs to.
// Without one a worker cannot send its logs, and a V1 job never ends.
type CDNTCPConfig struct {
	// URL is host:port; empty means the API's tcp_url.
	URL string `mapstructure:"url" toml:"url" json:"url"`
	// EnableTLS makes workers dial it with TLS; it goes with URL (when
	// URL is empty, the API's tcp_url_enable_tls is used).
	EnableTLS bool `mapstructure:"enableTLS" toml:"enableTLS" json:"enableTLS"`
}

// ProvisionConfig bounds how many workers the hatchery starts.
type ProvisionConfig struct {
	// MaxWorker 0 means unlimited.
	MaxWorker                 int `mapstructure:"maxWorker" toml:"maxWorker" json:"maxWorker"`
	MaxConcurrentProvisioning int `mapstructure:"maxConcurrentProvisioning" toml:"maxConcurrentProvisioning" json:"maxConcurrentProvisioning"`
	// MaxConcurrentRegistering -1 disables model registration.
	MaxConcurrentRegistering int `mapstructure:"maxConcurrentRegistering" toml:"maxConcurrentRegistering" json:"maxConcurrentRegistering"`
	// RegisterFrequency is in seconds.
	RegisterFrequency     int    `mapstructure:"registerFrequency" toml:"registerFrequency" json:"registerFrequency"`
	Region                string `mapstructure:"region" toml:"region" json:"region"`
	IgnoreJobWithNoRegion bool   `mapstructure:"ignoreJobWithNoRegion" toml:"ignoreJobWithNoRegion" json:"ignoreJobWithNoRegion"`
	// MaxAttemptsNumberBeforeFailure -1 disables the cap.
	MaxAttemptsNumberBeforeFailure int              `mapstructure:"maxAttemptsNumberBeforeFailure" toml:"maxAttemptsNumberBeforeFailure" json:"maxAttemptsNumberBeforeFailure"`
	InjectEnvVars                  []string         `mapstructure:"injectEnvVars" toml:"injectEnvVars" json:"injectEnvVars"`
	WorkerBasedir                  string           `mapstructure:"workerBasedir" toml:"workerBasedir" json:"workerBasedir"`
	WorkerAPIHTTP                  HTTPClientConfig `mapstructure:"workerApiHttp" toml:"workerApiHttp" json:"workerApiHttp"`
}
