//! Assembling and running a node: shared state, listeners, shutdown.
//!
//! [`NodeBuilder`] takes the validated config plus the pluggable parts
//! (session validator, room policy, RPC handlers) and [`NodeBuilder::start`]
//! binds the HTTP, WebSocket, QUIC and WebTransport listeners (port 0
//! works, for tests; the UDP ones only when enabled, after loading or
//! creating the TLS certificate) and
//! returns a [`RunningNode`]. Shutdown: [`RunningNode::shutdown`] stops
//! accepting, asks every connection to flush and close with a going-away
//! code, and [`RunningNode::wait`] returns when all tasks ended (bounded by
//! `shutdown.grace_ms`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::actors::TransformHub;
use crate::config::Config;
use crate::gateway::connection::{ConnectionDeps, ParticipantIds};
use crate::gateway::handshake::{RejectAllTokens, SessionValidator};
use crate::http::{CorsOrigins, DemoAddrs, HttpState, OpsView, WebTransportInfo};
use crate::metrics::Metrics;
use crate::netpeer::NetPeerNode;
use crate::realm::{DefaultRoomPolicy, Places, Realm, RoomPolicy};
use crate::router::{LocalRouter, Router};
use crate::rpc::{RpcHandler, RpcRegistry};
use crate::runtime::{HostServices, LuaRoomPolicy, Runtime, RuntimeDeps};
use crate::services::AccountService;
use crate::services::accounts::StoreSessionValidator;
use crate::services::friends::FriendService;
use crate::services::groups::GroupService;
use crate::services::live::LiveSessions;
use crate::services::matchmaker::Matchmaker;
use crate::services::notifications::NotificationService;
use crate::services::party::Parties;
use crate::store::{PoolSettings, SqlStore, Store};
use crate::transport::TransportDeps;
use crate::transport::link::LinkSettings;
use crate::transport::renew::{Renewal, UdpEndpoints};
use crate::transport::slot::Admission;
use crate::transport::tls::{CurrentTls, TlsIdentity};
use crate::transport::webtransport::WtEndpoint;
use crate::transport::ws::WsSettings;

/// The handles of a running node, for its embedder and tests
/// ([`RunningNode::shared`]); listeners, connections and services are each
/// built with only the handles they use.
pub struct NodeShared {
    /// The validated configuration.
    pub config: Config,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// Rooms and membership.
    pub realm: Arc<Realm>,
    /// Delivery to connections.
    pub router: Arc<dyn Router>,
    /// What each realtime connection is built with.
    pub gateway: Arc<ConnectionDeps>,
    /// The Lua runtime (`None`: disabled or no `main.lua`, built-in relay).
    pub runtime: Option<Runtime>,
    /// Accounts and sessions.
    pub accounts: Arc<AccountService>,
    /// Durable player notifications.
    pub notifications: Arc<NotificationService>,
    /// The friend graph.
    pub friends: Arc<FriendService>,
    /// Groups and their roles.
    pub groups: Arc<GroupService>,
    /// The ticket matchmaker.
    pub matchmaker: Arc<Matchmaker>,
    /// Durable chat.
    pub chat: Arc<crate::services::chat::ChatService>,
    /// Live authenticated connections by session (revocation).
    pub live: Arc<LiveSessions>,
    /// Networked actors and snapshots.
    pub hub: Arc<TransformHub>,
    /// NetworkPeer replication.
    pub netpeer: Arc<NetPeerNode>,
    /// Cancelled when the node shuts down.
    pub shutdown: CancellationToken,
    /// Connection and RPC tasks.
    pub tasks: TaskTracker,
    /// Realtime connection slots and the per-address cap
    /// (`transport.limits.max_connections`, `max_connections_per_ip`).
    pub admission: Arc<Admission>,
    /// When the node started.
    pub started: Instant,
    /// The TLS identity of QUIC / WebTransport (empty when both are off);
    /// see [`NodeShared::tls`].
    pub current_tls: Arc<CurrentTls>,
}

impl std::fmt::Debug for NodeShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeShared")
            .field("node_id", &self.config.server.node_id)
            .finish_non_exhaustive()
    }
}

impl NodeShared {
    /// The certificate QUIC / WebTransport present now (None when both are
    /// off). A renewed development certificate replaces it.
    pub fn tls(&self) -> Option<Arc<TlsIdentity>> {
        self.current_tls.get()
    }
}

/// Configures a node before it starts.
pub struct NodeBuilder {
    config: Config,
    validator: Option<Arc<dyn SessionValidator>>,
    store: Option<Arc<dyn Store>>,
    policy: Option<Arc<dyn RoomPolicy>>,
    rpc: RpcRegistry,
}

impl NodeBuilder {
    /// Starts from a validated config with the built-in policy; tokens are
    /// validated against the configured database.
    pub fn new(config: Config) -> Self {
        NodeBuilder {
            config,
            validator: None,
            store: None,
            policy: None,
            rpc: RpcRegistry::default(),
        }
    }

    /// Replaces the session validator.
    pub fn session_validator(mut self, validator: Arc<dyn SessionValidator>) -> Self {
        self.validator = Some(validator);
        self
    }

    /// Refuses every realtime token (no account store consulted).
    pub fn reject_all_tokens(self) -> Self {
        self.session_validator(Arc::new(RejectAllTokens))
    }

    /// Uses an already connected store instead of `[database]`.
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// Replaces the room policy.
    pub fn room_policy(mut self, policy: Arc<dyn RoomPolicy>) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Registers an RPC method implemented in Rust (an embedder's or a
    /// built-in service's).
    pub fn rpc(self, method: &str, handler: impl RpcHandler) -> Self {
        if let Err(err) = self.rpc.register_builtin(method, Arc::new(handler)) {
            tracing::warn!(method, error = %err, "RPC method not registered");
        }
        self
    }

    /// Binds the listeners and starts serving.
    pub async fn start(self) -> anyhow::Result<RunningNode> {
        let config = self.config;
        config.validate()?;
        let metrics = Arc::new(Metrics::default());
        // A present but broken main.lua stops startup.
        let script_error =
            |e| anyhow::anyhow!("cannot load {}/main.lua: {e}", config.runtime.scripts_dir);
        let loaded = Runtime::load(&config.runtime, metrics.clone()).map_err(script_error)?;
        let fallback = DefaultRoomPolicy {
            default_max_players: config.rooms.default_max_players,
        };
        let policy: Arc<dyn RoomPolicy> = match (self.policy, &loaded) {
            (Some(policy), _) => policy,
            (None, Some(rt)) => Arc::new(LuaRoomPolicy::new(rt.runtime(), fallback)),
            (None, None) => Arc::new(fallback),
        };
        let store: Arc<dyn Store> = match self.store {
            Some(store) => store,
            None => Arc::new(connect_store(&config).await?),
        };
        let accounts = Arc::new(AccountService::new(
            store,
            config.authentication.clone(),
            config.server.node_id.clone(),
        ));
        let validator = self.validator.unwrap_or_else(|| {
            Arc::new(StoreSessionValidator {
                accounts: accounts.clone(),
            })
        });
        let http_listener = TcpListener::bind(config.http_addr()?)
            .await
            .map_err(|e| anyhow::anyhow!("cannot bind http.bind {}: {e}", config.http.bind))?;
        let ws_listener = if config.transport.websocket.enabled {
            let addr = config.websocket_addr()?;
            Some(TcpListener::bind(addr).await.map_err(|e| {
                anyhow::anyhow!(
                    "cannot bind transport.websocket.bind {}: {e}",
                    config.transport.websocket.bind
                )
            })?)
        } else {
            None
        };
        let (quic, webtransport, tls) = bind_udp_transports(&config)?;
        let webtransport_addr = match &webtransport {
            Some(endpoint) => Some(endpoint.local_addr()?),
            None => None,
        };
        let websocket_addr = match &ws_listener {
            Some(listener) => Some(listener.local_addr()?),
            None => None,
        };
        let places = Arc::new(Places::default());
        let router: Arc<dyn Router> = Arc::new(LocalRouter::new(places.clone()));
        let realm = Arc::new(Realm::new(
            config.rooms.clone(),
            policy,
            places,
            router.clone(),
        ));
        let hub = Arc::new(TransformHub::new(
            config.transform_sync.clone(),
            metrics.clone(),
            router.clone(),
        )?);
        let netpeer = Arc::new(NetPeerNode::new(
            &config.transport.network_peer,
            metrics.clone(),
            router.clone(),
        )?);
        let rpc = Arc::new(self.rpc);
        let notifications = Arc::new(NotificationService::new(
            accounts.store().clone(),
            router.clone(),
            config.notifications.clone(),
            metrics.clone(),
        ));
        crate::services::notifications::rpc::register(&rpc, &notifications);
        let chat = Arc::new(crate::services::chat::ChatService::new(
            accounts.store().clone(),
            realm.clone(),
            router.clone(),
            config.chat.clone(),
            metrics.clone(),
            &config.server.node_id,
        ));
        crate::services::chat::rpc::register(&rpc, &chat);
        // Unfriends, blocks, kicks, leaves and deletions revoke chat at once.
        let revocations: Arc<dyn crate::services::chat::revocations::ChatRevocations> =
            chat.clone();
        let friends = Arc::new(
            FriendService::new(
                accounts.store().clone(),
                config.friends.clone(),
                metrics.clone(),
            )
            .with_revocations(revocations.clone()),
        );
        crate::services::friends::register(&rpc, &friends);
        let groups = Arc::new(
            GroupService::new(
                accounts.store().clone(),
                config.groups.clone(),
                metrics.clone(),
            )
            .with_revocations(revocations),
        );
        crate::services::groups::rpc::register(&rpc, &groups);
        let parties = Arc::new(Parties::new(config.party.clone()));
        let matchmaker = Arc::new(Matchmaker::new(
            config.matchmaker.clone(),
            realm.clone(),
            router.clone(),
            hub.clone(),
            metrics.clone(),
            parties.clone(),
        ));
        // The script labels matched rooms through the runtime's handle, which
        // exists from load on (calls queue until the VM thread starts): the
        // matchmaker has its labeler before anything can use it.
        if let Some(loaded) = &loaded {
            let labeler = crate::runtime::LuaMatchLabeler::new(loaded.runtime());
            matchmaker.set_labeler(Arc::new(labeler));
        }
        crate::services::matchmaker::rpc::register(&rpc, &matchmaker);
        crate::services::party::rpc::register(&rpc, &parties, &matchmaker);
        let runtime = match loaded {
            Some(loaded) => Some(
                loaded
                    .start(RuntimeDeps {
                        realm: realm.clone(),
                        router: router.clone(),
                        hub: hub.clone(),
                        netpeer: netpeer.clone(),
                        rpc: rpc.clone(),
                        host: HostServices {
                            notifications: notifications.clone(),
                            groups: groups.clone(),
                            chat: chat.clone(),
                            handle: tokio::runtime::Handle::current(),
                        },
                    })
                    .map_err(script_error)?,
            ),
            None => None,
        };
        let live = Arc::new(LiveSessions::default());
        let tasks = TaskTracker::new();
        let gateway = Arc::new(ConnectionDeps {
            auth: config.transport.auth.clone(),
            limits: config.transport.limits.clone(),
            metrics: metrics.clone(),
            realm: realm.clone(),
            router: router.clone(),
            rpc,
            validator,
            runtime: runtime.clone(),
            live: live.clone(),
            hub: hub.clone(),
            netpeer: netpeer.clone(),
            tasks: tasks.clone(),
            participant_ids: Arc::new(ParticipantIds::default()),
            matchmaker: matchmaker.clone(),
            chat: Some(chat.clone()),
        });
        let current_tls = CurrentTls::new(tls);
        let shared = Arc::new(NodeShared {
            metrics: metrics.clone(),
            realm,
            router,
            gateway,
            runtime,
            accounts,
            notifications,
            friends,
            groups,
            matchmaker,
            chat,
            live,
            hub,
            netpeer,
            shutdown: CancellationToken::new(),
            tasks,
            admission: Arc::new(Admission::new(
                config.transport.limits.max_connections,
                config.transport.limits.max_connections_per_ip,
                metrics,
            )),
            started: Instant::now(),
            current_tls,
            config,
        });
        let http_addr = http_listener.local_addr()?;
        shared.tasks.spawn(crate::services::revocation::run_poller(
            shared.live.clone(),
            shared.accounts.clone(),
            Duration::from_millis(shared.config.transport.auth.revocation_poll_ms),
            shared.shutdown.clone(),
        ));
        shared
            .tasks
            .spawn(shared.chat.clone().run(shared.shutdown.clone()));
        shared.tasks.spawn(crate::services::matchmaker::run_tick(
            shared.matchmaker.clone(),
            shared.shutdown.clone(),
        ));
        if shared.hub.enabled() {
            shared
                .tasks
                .spawn(run_sim(shared.hub.clone(), shared.shutdown.clone()));
        }
        if shared.netpeer.enabled() {
            shared
                .tasks
                .spawn(run_netpeer(shared.netpeer.clone(), shared.shutdown.clone()));
        }
        let http = tokio::spawn(crate::http::serve(
            http_listener,
            http_state(&shared, websocket_addr, webtransport_addr),
            crate::http::ListenerSettings {
                http: shared.config.http.clone(),
                grace: Duration::from_millis(shared.config.shutdown.grace_ms),
            },
            shared.shutdown.clone(),
        ));
        let realtime = TransportDeps {
            gateway: shared.gateway.clone(),
            metrics: shared.metrics.clone(),
            admission: shared.admission.clone(),
            shutdown: shared.shutdown.clone(),
            tasks: shared.tasks.clone(),
        };
        let transport = &shared.config.transport;
        let ws_addr = match ws_listener {
            Some(listener) => {
                let addr = listener.local_addr()?;
                shared.tasks.spawn(crate::transport::ws::serve(
                    listener,
                    realtime.clone(),
                    WsSettings::new(&transport.websocket, &shared.config),
                ));
                Some(addr)
            }
            None => None,
        };
        let mut udp = UdpEndpoints::default();
        let quic_addr = match quic {
            Some(endpoint) => {
                let addr = endpoint.local_addr()?;
                udp.quic = Some(endpoint.clone());
                shared.tasks.spawn(crate::transport::quic::serve(
                    endpoint,
                    realtime.clone(),
                    LinkSettings::new(&transport.quic.lanes, &shared.config),
                ));
                Some(addr)
            }
            None => None,
        };
        if let Some(endpoint) = webtransport {
            udp.webtransport = Some(endpoint.clone());
            shared.tasks.spawn(crate::transport::webtransport::serve(
                endpoint,
                realtime,
                LinkSettings::new(&transport.webtransport.lanes, &shared.config),
                transport.webtransport.path.clone(),
            ));
        }
        let renewal = Arc::new(Renewal {
            tls: shared.current_tls.clone(),
            transport: transport.clone(),
            endpoints: udp,
        });
        if shared.tls().is_some_and(|t| t.dev_not_after.is_some()) {
            shared
                .tasks
                .spawn(renewal.clone().run(shared.shutdown.clone()));
        }
        Ok(RunningNode {
            http_addr,
            ws_addr,
            quic_addr,
            webtransport_addr,
            renewal,
            shared,
            http,
        })
    }
}

/// The HTTP routes' state: one handle per concern.
fn http_state(
    shared: &NodeShared,
    websocket: Option<SocketAddr>,
    webtransport: Option<SocketAddr>,
) -> HttpState {
    let config = &shared.config;
    HttpState {
        metrics: shared.metrics.clone(),
        ops: Arc::new(OpsView {
            node_id: config.server.node_id.clone(),
            started: shared.started,
            backend: shared.accounts.store().backend(),
            transports: OpsView::transports_json(&config.transport),
            realm: shared.realm.clone(),
            hub: shared.hub.clone(),
            metrics: shared.metrics.clone(),
        }),
        accounts: shared.accounts.clone(),
        live: shared.live.clone(),
        cors: CorsOrigins(config.http.cors_allowed_origins.clone().into()),
        demo: DemoAddrs {
            websocket,
            webtransport,
        },
        webtransport: Arc::new(WebTransportInfo {
            addr: webtransport,
            path: config.transport.webtransport.path.clone(),
            tls: shared.current_tls.clone(),
        }),
    }
}

type UdpTransports = (
    Option<quinn::Endpoint>,
    Option<Arc<WtEndpoint>>,
    Option<Arc<TlsIdentity>>,
);

/// Loads the TLS identity and binds QUIC / WebTransport when enabled.
fn bind_udp_transports(config: &Config) -> anyhow::Result<UdpTransports> {
    let t = &config.transport;
    if !t.quic.enabled && !t.webtransport.enabled {
        return Ok((None, None, None));
    }
    crate::transport::tls::install_crypto_provider();
    let identity = Arc::new(crate::transport::tls::load_or_create(&t.tls)?);
    let quic = if t.quic.enabled {
        Some(crate::transport::quic::endpoint(
            &t.quic,
            &identity,
            config.quic_addr()?,
        )?)
    } else {
        None
    };
    let webtransport = if t.webtransport.enabled {
        Some(crate::transport::webtransport::endpoint(
            &t.webtransport,
            &identity,
            config.webtransport_addr()?,
        )?)
    } else {
        None
    };
    Ok((quic, webtransport, Some(identity)))
}

/// The transform-sync tick: steps worlds at `sim_hz` and sends snapshots.
async fn run_sim(hub: Arc<TransformHub>, shutdown: CancellationToken) {
    let period = Duration::from_secs_f64(1.0 / f64::from(hub.sim_hz().max(1)));
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticker.tick() => hub.handle_tick(),
        }
    }
}

/// The NetworkPeer tick: sends what changed at `network_peer.tick_hz`.
async fn run_netpeer(netpeer: Arc<NetPeerNode>, shutdown: CancellationToken) {
    let period = Duration::from_secs_f64(1.0 / f64::from(netpeer.tick_hz().max(1)));
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticker.tick() => netpeer.handle_tick(),
        }
    }
}

/// Connects the configured database and applies its migrations.
pub async fn connect_store(config: &Config) -> anyhow::Result<SqlStore> {
    let settings = PoolSettings {
        max_connections: config.database.max_connections,
        acquire_timeout: Duration::from_millis(config.database.acquire_timeout_ms),
        wal_checkpoint_interval: (config.database.wal_checkpoint_interval_ms > 0)
            .then(|| Duration::from_millis(config.database.wal_checkpoint_interval_ms)),
    };
    SqlStore::connect(&config.database.url, &settings)
        .await
        .map_err(|e| anyhow::anyhow!("database: {e}"))
}

/// A serving node.
pub struct RunningNode {
    /// Bound HTTP address.
    pub http_addr: SocketAddr,
    /// Bound WebSocket address (if enabled).
    pub ws_addr: Option<SocketAddr>,
    /// Bound QUIC UDP address (if enabled).
    pub quic_addr: Option<SocketAddr>,
    /// Bound WebTransport UDP address (if enabled).
    pub webtransport_addr: Option<SocketAddr>,
    renewal: Arc<Renewal>,
    shared: Arc<NodeShared>,
    http: tokio::task::JoinHandle<()>,
}

impl RunningNode {
    /// Shared state (metrics, realm, config).
    pub fn shared(&self) -> &Arc<NodeShared> {
        &self.shared
    }

    /// `ws://` URL of the WebSocket listener.
    pub fn ws_url(&self) -> Option<String> {
        self.ws_addr.map(|a| format!("ws://{a}/"))
    }

    /// `host:port` of the QUIC listener (for `QuicClient::connect`).
    pub fn quic_url(&self) -> Option<String> {
        self.quic_addr.map(|a| a.to_string())
    }

    /// `https://` URL of the WebTransport session.
    pub fn webtransport_url(&self) -> Option<String> {
        self.webtransport_addr.map(|a| {
            format!(
                "https://{a}{}",
                self.shared.config.transport.webtransport.path
            )
        })
    }

    /// Renews the development certificate if it is due at `now` (the node
    /// checks hourly by itself; this is for tests and operators). True if
    /// renewed.
    pub fn renew_certificate_if_due(&self, now: std::time::SystemTime) -> anyhow::Result<bool> {
        self.renewal.renew_if_due(now)
    }

    /// Stops accepting and asks every connection to flush and close.
    pub fn shutdown(&self) {
        self.shared.shutdown.cancel();
    }

    /// Waits until every connection ended (after [`RunningNode::shutdown`]),
    /// at most the grace period plus a second.
    pub async fn wait(self) {
        self.shared.tasks.close();
        let grace =
            Duration::from_millis(self.shared.config.shutdown.grace_ms) + Duration::from_secs(1);
        if tokio::time::timeout(grace, self.shared.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("shutdown grace elapsed with connections still open");
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), self.http).await;
        if let Some(rt) = &self.shared.runtime {
            rt.stop();
        }
    }
}
