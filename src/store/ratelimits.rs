//! Rate-limit buckets by limiter and client address, kept where several processes serve the
//! store (PostgreSQL) so an address has one bucket across them. `auth::ratelimit` decides what
//! a bucket holds; this keeps the rows.

use super::codec::{decode, encode};
use super::kv::Readable;
use super::tables::RATE_BUCKETS;
use super::{Store, StoreError, Tx};
use crate::model::Timestamp;
use crate::model::identity::RateBucket;
use crate::store::{TxResult, Wrote};
use std::net::IpAddr;
use std::sync::Arc;

fn bucket_key(limiter: &str, ip: IpAddr) -> Vec<u8> {
    let mut key = limiter.as_bytes().to_vec();
    key.push(0);
    key.extend_from_slice(ip.to_string().as_bytes());
    key
}

fn bucket_in(
    table: &impl Readable<&'static [u8], &'static [u8]>,
    limiter: &str,
    ip: IpAddr,
) -> Result<Option<RateBucket>, StoreError> {
    table
        .get(bucket_key(limiter, ip).as_slice())?
        .map(|v| decode(v.value()))
        .transpose()
}

impl Tx<'_> {
    /// A limiter's bucket for `ip`, if it has one.
    pub(crate) fn rate_bucket(
        &self,
        limiter: &str,
        ip: IpAddr,
    ) -> Result<Option<RateBucket>, StoreError> {
        bucket_in(&self.open_table(RATE_BUCKETS)?, limiter, ip)
    }

    pub(crate) fn put_rate_bucket(
        &self,
        limiter: &str,
        ip: IpAddr,
        bucket: &RateBucket,
    ) -> Result<(), StoreError> {
        self.open_table(RATE_BUCKETS)?.insert(
            bucket_key(limiter, ip).as_slice(),
            encode(bucket)?.as_slice(),
        )?;
        Ok(())
    }
}

impl Store {
    /// A limiter's bucket for `ip`, if it has one.
    pub(crate) async fn rate_bucket(
        self: &Arc<Self>,
        limiter: &'static str,
        ip: IpAddr,
    ) -> Result<Option<RateBucket>, StoreError> {
        self.read(move |tx| bucket_in(&tx.open_table(RATE_BUCKETS)?, limiter, ip))
            .await
    }

    /// Removes the buckets untouched since `idle_since` (full again by then); how many.
    pub(crate) async fn forget_rate_buckets(
        self: &Arc<Self>,
        idle_since: Timestamp,
    ) -> Result<usize, StoreError> {
        self.transact(move |tx| -> TxResult<_> {
            let idle: Vec<Vec<u8>> = {
                let table = tx.open_table(RATE_BUCKETS)?;
                let mut idle = Vec::new();
                for row in table.range::<&[u8]>(..)? {
                    let (key, value) = row?;
                    let bucket: RateBucket = decode(value.value())?;
                    if bucket.last < idle_since {
                        idle.push(key.value().to_vec());
                    }
                }
                idle
            };
            let mut table = tx.open_table(RATE_BUCKETS)?;
            for key in &idle {
                table.remove(key.as_slice())?;
            }
            tx.unrecorded("rate-limit buckets of addresses idle for an hour");
            Ok(Wrote::new(idle.len(), !idle.is_empty()))
        })
        .await
    }
}
