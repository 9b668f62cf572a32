"""The TOML config (docs/REFERENCE.md, Config): store, deployment defaults, routes, sources.

Commands look for ./specdec.toml unless --config says otherwise; the store is
[store] path (relative to the config's folder), else specdec.db beside the config, unless
--db says otherwise. Every [deployment] key may be overridden per route; the merged
mapping is validated by model.deployment.Deployment.from_mapping where it is used.

[collect] interval / timeout / max_page_bytes / max_engines and [source] timeout / max_series are
optional (docs/REFERENCE.md, Config).

A route's targets are named by their shown URLs (acceptance.target_access: a credential-named
query value as ***), and only the collector's fetch sees a target as written and the credential
that [collect] or the route names by environment variables (``Config.scrape_access``); a target
URL with userinfo is refused, since it would never be sent.
"""

from __future__ import annotations

import tomllib
import difflib
from dataclasses import dataclass, field, replace
from pathlib import Path

from acceptance.errors import InputError
from acceptance.limits import DEFAULT_MAX_BYTES, DEFAULT_MAX_ENGINES, DEFAULT_MAX_SERIES
from acceptance.limits import PROMETHEUS_TIMEOUT_S as DEFAULT_TIMEOUT_S
from acceptance.names import has_control_characters
from acceptance.target_access import Credential, TargetAccess, has_userinfo, shown_url
from acceptance.durations import duration_seconds
from model.deployment import BUILTIN_PROFILES, INLINE_DEFAULTS, Deployment  # BUILTIN_PROFILES: anything else names a measured table file
from model.figures_needed import unread_once_anchored
from model.unused_keys import unread_without_probe, unused_keys

DEFAULT_CONFIG_NAME = "specdec.toml"
DEFAULT_STORE_NAME = "specdec.db"
ROUTE_SOURCES = ("scrape", "prometheus", "per-request", "log")



class ConfigError(InputError):
    """A missing or broken config: the message is one line naming the file and the key."""


def parse_duration(text: str | int | float, *, what: str = "duration") -> float:
    """Seconds from a number of seconds or a duration with s, m, h or d ("15m", "7d")."""
    if isinstance(text, bool):
        raise InputError(f"{what}: expected seconds or a duration like 15m, got {text!r}")
    seconds = duration_seconds(text)
    if seconds is None:
        raise InputError(f"{what}: expected seconds or a duration like 15m or 7d, got {text!r}")
    if seconds <= 0:
        raise InputError(f"{what}: must be positive, got {text!r}")
    return seconds


# the keys that name a /metrics target's credential, in [collect] and in a route's table
CREDENTIAL_KEYS = ("bearer_token_env", "basic_auth_username", "basic_auth_password_env")


@dataclass(frozen=True)
class ScrapeCredential:
    """The credential a target is scraped with, as the config names it: a bearer token, or a
    basic-auth user and password, each secret in an environment variable read when a collect
    starts (``resolve``), never in the config."""

    bearer_token_env: str | None = None
    basic_auth_username: str | None = None
    basic_auth_password_env: str | None = None
    where: str = ""  # the table that names it, for messages

    def resolve(self) -> Credential:
        if self.bearer_token_env is not None:
            return Credential.bearer(_secret_from(self.bearer_token_env, f"{self.where} bearer_token_env"))
        assert self.basic_auth_username is not None and self.basic_auth_password_env is not None
        password = _secret_from(self.basic_auth_password_env, f"{self.where} basic_auth_password_env")
        return Credential.basic(self.basic_auth_username, password)


def _secret_from(env: str, key: str) -> str:
    import os

    value = os.environ.get(env, "").strip()
    if not value:
        raise ConfigError(f"{key} names {env!r}, which is not set in the environment")
    return value


@dataclass(frozen=True)
class RouteConfig:
    name: str
    source: str                      # scrape | prometheus | per-request | log
    targets: tuple[str, ...] = ()
    selector: str | None = None
    deployment: dict = field(default_factory=dict)  # [deployment] merged with the route's overrides
    # engines serving the route, for sources whose rows name none (per-request, log): what a
    # probe's share of the traffic and its duration follow from (None: the window's, if any)
    engines: int | None = None
    # the deployment (one set of engines, one --speculative-config) the route shares with the
    # other routes naming it; None: the route is a deployment of its own
    shared_deployment: str | None = None
    # the targets as written (what is fetched), in the order of ``targets`` (their shown names)
    target_urls: tuple[str, ...] = field(default=(), repr=False)
    credential: ScrapeCredential | None = None  # the route's own, else [collect]'s


@dataclass(frozen=True)
class PrometheusSource:
    url: str
    bearer_token_env: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S  # one query's deadline, connect to last byte
    max_series: int = DEFAULT_MAX_SERIES  # the most series one query's answer may hold


@dataclass(frozen=True)
class Config:
    path: Path | None                # None: no config file (defaults only)
    store_path: Path
    retention_s: float | None
    deployment: dict                 # the [deployment] table as written
    routes: dict[str, RouteConfig]
    prometheus: PrometheusSource | None = None
    collect_interval_s: float = 15.0
    collect_timeout_s: float = 5.0
    max_page_bytes: int = DEFAULT_MAX_BYTES  # one limit: the fetcher's
    max_engines: int = DEFAULT_MAX_ENGINES  # per target page
    # deployment keys a command's flags set over [deployment] and every route's table (with_flags)
    flags: dict = field(default_factory=dict)

    def with_flags(self, flags: dict) -> "Config":
        """The config with ``flags`` (deployment keys → values) over [deployment] and over every
        route's own keys: a flag is what the user says now, for whichever route is tuned."""
        if not flags:
            return self
        routes = {name: replace(r, deployment={**r.deployment, **flags}) for name, r in self.routes.items()}
        return replace(self, deployment={**self.deployment, **flags}, routes=routes, flags=dict(flags))

    def store_path_for(self, db: str | None) -> Path:
        """The store a command reads or writes: --db when given, else [store] path (relative to
        the config's folder), else specdec.db beside the config."""
        return Path(db) if db else self.store_path

    def route(self, name: str, ingested: tuple[str, ...] = ()) -> RouteConfig:
        """The route's config entry; a one-line error naming the routes there are (configured,
        and ``ingested``: those the store holds rows of) when it has none."""
        try:
            return self.routes[name]
        except KeyError:
            known = ", ".join(sorted(self.routes)) or "none"
            where = self.path or "no specdec.toml found"
            stored = f"; ingested: {', '.join(sorted(ingested))}" if ingested else ""
            close = difflib.get_close_matches(name, [*self.routes, *ingested], n=1)
            guess = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(
                f"{where}: unknown route {name!r} (configured routes: {known}{stored}); {guess}add [routes.{name}] "
                f"or ingest data for it"
            ) from None

    def shared_deployments(self) -> dict[str, list[str]]:
        """{deployment name: its routes in config order} of the routes with a ``deployment`` key."""
        out: dict[str, list[str]] = {}
        for route in self.routes.values():
            if route.shared_deployment is not None:
                out.setdefault(route.shared_deployment, []).append(route.name)
        return out

    def deployment_routes(self, name: str) -> list[str]:
        """The routes of shared deployment ``name`` (a one-line error naming the known ones)."""
        routes = self.shared_deployments().get(name)
        if not routes:
            known = ", ".join(sorted(self.shared_deployments())) or "none"
            raise ConfigError(f"{self.path or 'no specdec.toml found'}: no route names deployment {name!r} (deployments: {known}); "
                              f"add deployment = \"{name}\" to the [routes.NAME] tables of the routes it serves")
        return routes

    def all_targets(self) -> list[str]:
        seen: dict[str, None] = {}
        for route in self.routes.values():
            for t in route.targets:
                seen.setdefault(t, None)
        return list(seen)

    def scrape_access(self, routes: list[str] | None = None) -> dict[str, TargetAccess]:
        """For each target (of ``routes``, else of every route) by its shown name: the URL
        fetched and the credential sent, its secret read from the environment now
        (ConfigError naming the variable when it is not set)."""
        access: dict[str, TargetAccess] = {}
        for name in routes if routes is not None else list(self.routes):
            route = self.routes[name]
            credential = route.credential.resolve() if route.credential is not None else None
            for shown, url in zip(route.targets, route.target_urls or route.targets):
                access[shown] = TargetAccess(url, credential)
        return access


def load_config(path: str | Path | None = None, *, required: bool = False) -> Config:
    """Read the config at ``path`` (or ./specdec.toml). Without a file and not ``required``,
    return the defaults: no routes, store ./specdec.db."""
    explicit = path is not None
    p = Path(path) if explicit else Path(DEFAULT_CONFIG_NAME)
    if not p.exists():
        if explicit or required:
            raise ConfigError(f"{p}: config file not found (write one, see README 'Config reference', or pass --config)")
        return Config(path=None, store_path=Path(DEFAULT_STORE_NAME), retention_s=None, deployment={}, routes={})
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: not valid TOML: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{p}: cannot read config: {e}") from None
    return config_from_mapping(raw, path=p)


# The config's sections and the keys each takes: anything else is a typo to name, never to
# ignore (a misspelt `retension` would turn retention off without a word).
SECTIONS = ("store", "collect", "deployment", "source", "routes")
SECTION_KEYS = {
    "store": ("path", "retention"),
    "collect": ("interval", "timeout", "max_page_bytes", "max_engines", *CREDENTIAL_KEYS),
    "source": ("kind", "url", "bearer_token_env", "timeout", "max_series"),
}
ROUTE_KEYS = ("targets", "selector", "source", "engines", "deployment", *CREDENTIAL_KEYS)  # besides the [deployment] keys


def _check_known(raw: dict, where: str) -> None:
    """Unknown sections, and unknown keys of [store], [collect], [source] and [deployment],
    are errors naming them and the known ones."""
    from model.deployment import DEPLOYMENT_KEYS

    for section in raw:
        if section not in SECTIONS:
            raise ConfigError(f"{where}: unknown section [{section}] (known: {', '.join(f'[{s}]' for s in SECTIONS)})")
    for section, known in (*SECTION_KEYS.items(), ("deployment", DEPLOYMENT_KEYS)):
        table = raw.get(section)
        if isinstance(table, dict):
            for key in table:
                if key not in known:
                    raise ConfigError(f"{where}: unknown key {key!r} in [{section}] (known: {', '.join(known)})")


def _table(raw: dict, key: str, where: str) -> dict:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: [{key}] must be a table")
    return value


def _resolve_cost_table(deployment: dict, base: Path) -> dict:
    """A measured cost table named by a relative path is relative to the config's folder."""
    profile = deployment.get("cost_profile")
    if isinstance(profile, str) and profile not in BUILTIN_PROFILES and not Path(profile).is_absolute():
        return {**deployment, "cost_profile": str(base / profile)}
    return deployment


def config_from_mapping(raw: dict, *, path: Path | None) -> Config:
    where = str(path) if path else "config"
    base = path.parent if path else Path(".")
    _check_known(raw, where)
    store = _table(raw, "store", where)
    store_path = Path(store.get("path", DEFAULT_STORE_NAME))
    if not store_path.is_absolute():
        store_path = base / store_path
    retention_s = None
    try:
        if "retention" in store:
            retention_s = parse_duration(store["retention"], what="[store] retention")
        collect = _table(raw, "collect", where)
        interval = parse_duration(collect.get("interval", 15), what="[collect] interval")
        timeout = parse_duration(collect.get("timeout", 5), what="[collect] timeout")
    except ValueError as e:
        raise ConfigError(f"{where}: {e}") from None
    max_page_bytes = collect.get("max_page_bytes", DEFAULT_MAX_BYTES)
    if not isinstance(max_page_bytes, int) or isinstance(max_page_bytes, bool) or max_page_bytes <= 0:
        raise ConfigError(f"{where}: [collect] max_page_bytes must be a positive integer, got {max_page_bytes!r}")
    max_engines = collect.get("max_engines", DEFAULT_MAX_ENGINES)
    if not isinstance(max_engines, int) or isinstance(max_engines, bool) or max_engines <= 0:
        raise ConfigError(f"{where}: [collect] max_engines must be a positive integer, got {max_engines!r}")

    collect_credential = _credential(collect, f"{where} [collect]")
    deployment = _resolve_cost_table(_table(raw, "deployment", where), base)
    source = _table(raw, "source", where)
    prometheus = None
    default_kind = source.get("kind", "scrape")
    if default_kind not in ROUTE_SOURCES:
        raise ConfigError(f"{where}: [source] kind must be one of {', '.join(ROUTE_SOURCES)}, got {default_kind!r}")
    if default_kind == "prometheus" or "url" in source:
        url = source.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(f"{where}: [source] url must be an http(s) URL of a Prometheus server, got "
                              f"{shown_url(url) if isinstance(url, str) else url!r}")
        if has_userinfo(url):
            raise ConfigError(f"{where}: [source] url {shown_url(url)} holds credentials, which are never sent: "
                              f"put the token in an environment variable and name it in [source] bearer_token_env")
        token_env = source.get("bearer_token_env")
        if token_env is not None and not isinstance(token_env, str):
            raise ConfigError(f"{where}: [source] bearer_token_env must name an environment variable")
        prometheus = PrometheusSource(url=url.rstrip("/"), bearer_token_env=token_env, **_prometheus_bounds(source, where))

    routes: dict[str, RouteConfig] = {}
    for name, table in _table(raw, "routes", where).items():
        if has_control_characters(name):
            raise ConfigError(f"{where}: route name {name!r} holds a control character")
        rwhere = f"{where} [routes.{name}]"
        if not isinstance(table, dict):
            raise ConfigError(f"{rwhere}: must be a table")
        _check_route_keys(table, rwhere)
        targets = _targets(table, rwhere)
        selector = table.get("selector")
        if selector is not None and not isinstance(selector, str):
            raise ConfigError(f"{rwhere}: selector must be a string of PromQL label matchers")
        kind = table.get("source")
        if kind is None:
            kind = "scrape" if targets else ("prometheus" if selector else default_kind)
        if kind not in ROUTE_SOURCES:
            raise ConfigError(f"{rwhere}: source must be one of {', '.join(ROUTE_SOURCES)}, got {kind!r}")
        if kind == "scrape" and not targets and "source" in table:
            raise ConfigError(f"{rwhere}: source 'scrape' needs targets = [\"http://HOST:PORT/metrics\", ...]")
        if kind == "scrape" and not targets:  # nothing says where its data comes from
            raise ConfigError(f"{rwhere}: no targets and no source: set targets = [\"http://HOST:PORT/metrics\", ...] "
                              f"to scrape its engines, or source = \"per-request\" or \"log\" for the rows "
                              f"`specdec ingest` stores (or \"prometheus\" with a selector)")
        if kind == "prometheus" and (selector is None or prometheus is None):
            raise ConfigError(f"{rwhere}: source 'prometheus' needs a selector and a [source] url")
        engines = table.get("engines")
        if engines is not None and (isinstance(engines, bool) or not isinstance(engines, int) or engines < 1):
            raise ConfigError(f"{rwhere}: engines must be an integer ≥ 1 (the engines serving the route), "
                              f"got {engines!r}")
        shared = table.get("deployment")
        if shared is not None and (not isinstance(shared, str) or not shared.strip() or has_control_characters(shared)):
            raise ConfigError(f"{rwhere}: deployment must name the deployment the route shares with other routes "
                              f"(a string), got {shared!r}")
        overrides = _resolve_cost_table({k: v for k, v in table.items() if k not in ROUTE_KEYS}, base)
        routes[name] = RouteConfig(
            name=name, source=kind, targets=tuple(shown_url(t) for t in targets), selector=selector,
            deployment={**deployment, **overrides}, engines=engines, shared_deployment=shared,
            target_urls=tuple(targets), credential=_credential(table, rwhere) or collect_credential,
        )
    _check_shared_deployments(routes, where)
    _check_target_names(routes, where)
    config = Config(
        path=path, store_path=store_path, retention_s=retention_s, deployment=dict(deployment),
        routes=routes, prometheus=prometheus, collect_interval_s=interval,
        collect_timeout_s=timeout, max_page_bytes=max_page_bytes, max_engines=max_engines,
    )
    # Every command checks every route's keys and values when it loads the config: collect,
    # rules and grafana would otherwise take a misspelt key silently, and a live tune would
    # find it only after scraping its whole window. Each route's check begins with [deployment].
    for route in routes or (None,):
        deployment_for_route(config, route)
    return config


def _check_route_keys(table: dict, where: str) -> None:
    """A route's key that is neither a route key nor a [deployment] key is named (a misspelt
    `target` was read as a route with no targets and no source), with the key it is closest to."""
    from model.deployment import DEPLOYMENT_KEYS

    known = (*ROUTE_KEYS, *DEPLOYMENT_KEYS)
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            guess = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(f"{where}: unknown key {key!r} ({guess}route keys: {', '.join(ROUTE_KEYS)}; or any "
                              f"[deployment] key)")


def _targets(table: dict, where: str) -> list[str]:
    """A route's targets as written: http(s) URLs without userinfo (a credential there would
    never be sent: the route's or [collect]'s credential keys say what is)."""
    targets = table.get("targets", [])
    if isinstance(targets, str):
        targets = [targets]
    if not isinstance(targets, list) or not all(isinstance(t, str) and t.startswith(("http://", "https://"))
                                                for t in targets):
        raise ConfigError(f"{where}: targets must be a list of http(s) URLs of vLLM /metrics pages")
    for target in targets:
        if has_userinfo(target):
            raise ConfigError(
                f"{where}: target {shown_url(target)} holds credentials in its URL, which are never sent: set "
                f"bearer_token_env (a bearer token), or basic_auth_username and basic_auth_password_env, in "
                f"the route's table or [collect], each secret in the environment variable it names")
    return targets


def _credential(table: dict, where: str) -> ScrapeCredential | None:
    """The credential keys of [collect] or a route's table, checked; None when it sets none."""
    given = {key: table[key] for key in CREDENTIAL_KEYS if key in table}
    if not given:
        return None
    for key, value in given.items():
        if not isinstance(value, str) or not value.strip() or has_control_characters(value):
            raise ConfigError(f"{where}: {key} must be a non-empty string"
                              + ("" if key == "basic_auth_username" else " naming an environment variable"))
    if "bearer_token_env" in given and len(given) > 1:
        raise ConfigError(f"{where}: bearer_token_env and basic_auth_* both set: a target takes one credential")
    if "bearer_token_env" not in given and len(given) != 2:
        missing = next(key for key in CREDENTIAL_KEYS[1:] if key not in given)
        raise ConfigError(f"{where}: basic auth needs basic_auth_username and basic_auth_password_env; {missing} "
                          f"is not set")
    return ScrapeCredential(**given, where=where)


def _check_target_names(routes: dict[str, RouteConfig], where: str) -> None:
    """A target named twice (in two routes, or written two ways that show the same) is one
    target: it must be written, and scraped with its credential, the same way everywhere."""
    seen: dict[str, tuple[str, ScrapeCredential | None, str]] = {}
    for route in routes.values():
        for shown, url in zip(route.targets, route.target_urls):
            first = seen.setdefault(shown, (url, route.credential, route.name))
            if first[0] != url:
                raise ConfigError(f"{where}: targets {shown} of [routes.{first[2]}] and [routes.{route.name}] differ "
                                  f"only in a credential-named query value: list each target once")
            if first[1] != route.credential:
                raise ConfigError(f"{where}: target {shown} is in [routes.{first[2]}] and [routes.{route.name}] with "
                                  f"different credentials: one target takes one credential")


def _prometheus_bounds(source: dict, where: str) -> dict:
    """[source] timeout (one query's deadline) and max_series, as PrometheusSource takes them."""
    try:
        timeout = parse_duration(source.get("timeout", DEFAULT_TIMEOUT_S), what="[source] timeout")
        if not timeout < 86400:  # a deadline that never comes is none (inf, nan)
            raise ValueError(f"[source] timeout: must be under a day, got {source['timeout']!r}")
    except ValueError as e:
        raise ConfigError(f"{where}: {e}") from None
    max_series = source.get("max_series", DEFAULT_MAX_SERIES)
    if not isinstance(max_series, int) or isinstance(max_series, bool) or max_series <= 0:
        raise ConfigError(f"{where}: [source] max_series must be a positive integer, got {max_series!r}")
    return {"timeout_s": timeout, "max_series": max_series}


def _check_shared_deployments(routes: dict[str, RouteConfig], where: str) -> None:
    """Routes of one deployment are served by the same engines: the same [deployment] keys."""
    first: dict[str, RouteConfig] = {}
    for route in routes.values():
        if route.shared_deployment is None:
            continue
        other = first.setdefault(route.shared_deployment, route)
        for key in sorted(set(other.deployment) | set(route.deployment)):
            if other.deployment.get(key) != route.deployment.get(key):
                raise ConfigError(
                    f"{where}: routes {other.name!r} and {route.name!r} share deployment {route.shared_deployment!r} "
                    f"(one set of engines, one --speculative-config) but set {key} differently "
                    f"({other.deployment.get(key)!r} and {route.deployment.get(key)!r})")


def deployment_for_route(config: Config, route: str | None) -> Deployment:
    """[deployment] merged with the route's overrides, validated (ModelInputError names the key)."""
    # [deployment] alone first, so that a bad key there is named there, not in the route that
    # inherits it. Without a config file: the inline defaults (dspark, 0.10, flat — docs/REFERENCE.md,
    # Sources and routes), what a route known only from `specdec ingest` is priced with.
    written = Deployment.from_mapping(config.deployment, where=f"{config.path or 'config'} [deployment]",
                                      base=INLINE_DEFAULTS if config.path is None else None)
    if route in config.routes:
        written = Deployment.from_mapping(config.routes[route].deployment,
                                          where=f"{config.path or 'config'} [routes.{route}]")
    return flagged(written, config.flags, route if route in config.routes else None)


def flagged(deployment: Deployment, flags: dict, route: str | None = None) -> Deployment:
    """``deployment`` (flags already merged) with the flags named as its source; a flag it
    would not read (model.figures_needed.unused_keys) is refused, naming it."""
    if not flags:
        return deployment
    _refuse_unread(flags, unused_keys(deployment), route)
    return replace(deployment, flagged=frozenset(flags))


def _refuse_unread(flags, unread: dict[str, str], route: str | None) -> None:
    """The first of ``flags`` that ``unread`` names ({key: why}) is refused, one line."""
    for key in flags:
        if key in unread:
            raise ConfigError(f"tune-gamma flags {key}: would change nothing here — {unread[key]}"
                              + (f" (route {route})" if route else ""))


def refuse_unread_flags(deployment: Deployment, anchor, route: str | None = None) -> None:
    """A flag the pricing turned out not to read once the window anchored it (a flat profile's
    model or GPU, which set only a default anchor: model.figures_needed.unread_once_anchored)
    is refused as flagged() refuses one up front, naming it."""
    _refuse_unread(sorted(deployment.flagged), unread_once_anchored(deployment, anchor), route)


def refuse_unpriced_probe_flags(deployment: Deployment, decisions, route: str | None = None) -> None:
    """A flag of a probe's pricing (decision_horizon_s, engine_restart_s) where none of
    ``decisions`` priced a probe (model.unused_keys.unread_without_probe) is refused, naming it."""
    _refuse_unread(sorted(deployment.flagged), unread_without_probe(decisions), route)


def route_source(config: Config, route: str, store=None) -> str:
    """Where a route's window comes from: its config entry, or — for a route known only
    from `specdec ingest` — what the store holds for it (per-request before log)."""
    if route in config.routes:
        return config.routes[route].source
    ingested = store.ingested_routes() if store is not None else {}
    sources = ingested.get(route)
    if sources:
        return "per-request" if "per-request" in sources else sources[0]
    config.route(route, tuple(ingested))  # raises the one-line unknown-route error
    raise AssertionError("unreachable")
