//! Where the `apiextensions-apiserver` and `etcd` binaries are found.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::{LocalApiServerError, Result, APISERVER_BINARY_ENV, CACHE_ENV};

/// Finds `apiextensions-apiserver`: `$FLEETSCOPE_APISERVER_BIN`, else the binary that
/// `scripts/install-apiserver` caches (see [`cached_apiserver_binary`]).
pub fn find_apiserver_binary() -> Result<PathBuf> {
    find_apiserver_binary_in(
        std::env::var_os(APISERVER_BINARY_ENV),
        std::env::var_os(CACHE_ENV),
        std::env::var_os("HOME"),
    )
}

/// Where `scripts/install-apiserver` puts the binary:
/// `${FLEETSCOPE_CACHE:-$HOME/.cache/fleetscope}/apiserver/bin/apiextensions-apiserver`, or
/// `None` when neither variable is set.
pub fn cached_apiserver_binary() -> Option<PathBuf> {
    cached_binary_in(std::env::var_os(CACHE_ENV), std::env::var_os("HOME"))
}

fn cached_binary_in(cache: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    // As in the script's `${FLEETSCOPE_CACHE:-…}`, an empty value counts as unset.
    let cache = match cache.filter(|value| !value.is_empty()) {
        Some(cache) => PathBuf::from(cache),
        None => PathBuf::from(home.filter(|value| !value.is_empty())?).join(".cache/fleetscope"),
    };
    Some(cache.join("apiserver/bin/apiextensions-apiserver"))
}

fn find_apiserver_binary_in(
    explicit: Option<OsString>,
    cache: Option<OsString>,
    home: Option<OsString>,
) -> Result<PathBuf> {
    if let Some(explicit) = explicit.filter(|value| !value.is_empty()) {
        let explicit = PathBuf::from(explicit);
        return if explicit.is_file() {
            Ok(explicit)
        } else {
            Err(LocalApiServerError::ApiServerNotInstalled {
                looked_at: format!("{} (from ${APISERVER_BINARY_ENV})", explicit.display()),
            })
        };
    }
    let Some(cached) = cached_binary_in(cache, home) else {
        return Err(LocalApiServerError::ApiServerNotInstalled {
            looked_at: format!("the cache (${CACHE_ENV} and $HOME are both unset)"),
        });
    };
    if cached.is_file() {
        Ok(cached)
    } else {
        Err(LocalApiServerError::ApiServerNotInstalled {
            looked_at: cached.display().to_string(),
        })
    }
}

/// Finds `etcd` in `PATH`, else at `/usr/bin/etcd` (Debian's `etcd-server` package).
pub fn find_etcd_binary() -> Result<PathBuf> {
    find_etcd_binary_in(std::env::var_os("PATH"))
}

fn find_etcd_binary_in(path: Option<OsString>) -> Result<PathBuf> {
    path.map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from("/usr/bin")])
        .map(|dir| dir.join("etcd"))
        .find(|candidate| candidate.is_file())
        .ok_or(LocalApiServerError::EtcdNotInstalled)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn missing_apiserver_says_to_run_the_install_script() {
        let err = find_apiserver_binary_in(
            None,
            Some("/nonexistent/fleetscope-cache".into()),
            Some("/root".into()),
        )
        .unwrap_err();
        let message = err.to_string();
        assert!(message.contains("scripts/install-apiserver"), "{message}");
        assert!(
            message.contains("/nonexistent/fleetscope-cache/apiserver/bin/apiextensions-apiserver"),
            "{message}"
        );

        let err = find_apiserver_binary_in(Some("/nonexistent/apiserver".into()), None, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("/nonexistent/apiserver"), "{err}");
        assert!(err.contains(APISERVER_BINARY_ENV), "{err}");
    }

    #[test]
    fn cache_path_follows_the_install_script() {
        assert_eq!(
            cached_binary_in(None, Some("/home/dev".into())),
            Some(PathBuf::from(
                "/home/dev/.cache/fleetscope/apiserver/bin/apiextensions-apiserver"
            ))
        );
        assert_eq!(
            cached_binary_in(Some("".into()), Some("/home/dev".into())),
            Some(PathBuf::from(
                "/home/dev/.cache/fleetscope/apiserver/bin/apiextensions-apiserver"
            ))
        );
        assert_eq!(
            cached_binary_in(Some("/srv/cache".into()), Some("/home/dev".into())),
            Some(PathBuf::from(
                "/srv/cache/apiserver/bin/apiextensions-apiserver"
            ))
        );
        assert_eq!(cached_binary_in(None, None), None);
    }

    #[test]
    fn missing_etcd_says_to_run_the_install_script() {
        // /usr/bin/etcd is always looked at, so this only checks the message.
        let message = LocalApiServerError::EtcdNotInstalled.to_string();
        assert!(message.contains("scripts/install-apiserver"), "{message}");
        assert!(message.contains("etcd-server"), "{message}");
        if !Path::new("/usr/bin/etcd").is_file() {
            assert!(find_etcd_binary_in(Some("/nonexistent".into())).is_err());
        }
    }
}
