//! OFPT_GROUP_MOD (OpenFlow 1.5 layout) and its buckets.

use crate::action::{self, Action};
use crate::error::Result;
use crate::wire::{len16, parse_list, part_len16, tlv, Reader};
use bytes::{BufMut, Bytes, BytesMut};

/// OFPT_GROUP_MOD (OF1.5 layout with command_bucket_id; buckets with actions).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct GroupMod {
    /// 0 add, 1 modify, 2 delete, 3 insert_bucket, 4 remove_bucket.
    pub command: u16,
    /// 0 all, 1 select, 2 indirect, 3 fast failover.
    pub group_type: u8,
    pub group_id: u32,
    pub command_bucket_id: u32,
    pub buckets: Vec<Bucket>,
    /// Group properties, raw.
    pub properties: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Bucket {
    pub bucket_id: u32,
    pub actions: Vec<Action>,
    /// Bucket properties (weight, watch_port, watch_group), raw.
    pub properties: Bytes,
}

/// Group mod commands and types.
pub mod group {
    pub const ADD: u16 = 0;
    pub const MODIFY: u16 = 1;
    pub const DELETE: u16 = 2;
    pub const INSERT_BUCKET: u16 = 3;
    pub const REMOVE_BUCKET: u16 = 5;
    pub const TYPE_ALL: u8 = 0;
    pub const TYPE_SELECT: u8 = 1;
    pub const TYPE_INDIRECT: u8 = 2;
    pub const TYPE_FF: u8 = 3;
    /// `command_bucket_id` for "all buckets" / "no specific bucket".
    pub const BUCKET_ALL: u32 = 0xffff_ffff;
    pub const BUCKET_FIRST: u32 = 0xffff_fffd;
    pub const BUCKET_LAST: u32 = 0xffff_fffe;
}

impl Bucket {
    fn wire_len(&self) -> usize {
        8 + action::actions_len(&self.actions) + self.properties.len()
    }

    /// Parses one bucket from the start of `buf`; returns it and its length.
    fn parse(buf: &[u8]) -> Result<(Bucket, usize)> {
        const WHAT: &str = "ofp15_bucket";
        let len = usize::from(Reader::new(buf, WHAT).u16()?);
        let mut r = Reader::new(tlv(buf, len, 8, false, WHAT)?, WHAT);
        r.take(2)?;
        let actions_len = usize::from(r.u16()?);
        let bucket_id = r.u32()?;
        let actions = action::parse_actions(r.take(actions_len)?)?;
        Ok((Bucket { bucket_id, actions, properties: Bytes::copy_from_slice(r.rest()) }, len))
    }

    /// A bucket with the given actions and a weight property (select groups; OVS's default
    /// weight is 100).
    pub fn with_weight(bucket_id: u32, weight: u16, actions: Vec<Action>) -> Bucket {
        let mut props = BytesMut::new();
        crate::prop::put_prop_u16(&mut props, 0, weight);
        Bucket { bucket_id, actions, properties: props.freeze() }
    }
}

impl GroupMod {
    pub fn parse(body: &[u8]) -> Result<GroupMod> {
        let mut r = Reader::new(body, "ofp15_group_mod");
        let command = r.u16()?;
        let group_type = r.u8()?;
        r.zeros(1)?;
        let group_id = r.u32()?;
        let buckets_len = usize::from(r.u16()?);
        r.zeros(2)?;
        let command_bucket_id = r.u32()?;
        let buckets = parse_list(r.take(buckets_len)?, Bucket::parse)?;
        Ok(GroupMod {
            command,
            group_type,
            group_id,
            command_bucket_id,
            buckets,
            properties: Bytes::copy_from_slice(r.rest()),
        })
    }

    pub fn buffer_len(&self) -> usize {
        16 + self.buckets.iter().map(Bucket::wire_len).sum::<usize>() + self.properties.len()
    }

    pub(crate) fn check(&self) -> Result<()> {
        let mut total = 0usize;
        for b in &self.buckets {
            len16("ofp15_bucket", b.wire_len())?;
            action::check_actions(&b.actions)?;
            total += b.wire_len();
        }
        len16("ofp15_group_mod buckets", total)?;
        Ok(())
    }

    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u16(self.command);
        out.put_u8(self.group_type);
        out.put_u8(0);
        out.put_u32(self.group_id);
        out.put_u16(part_len16(self.buckets.iter().map(Bucket::wire_len).sum::<usize>()));
        out.put_u16(0);
        out.put_u32(self.command_bucket_id);
        for b in &self.buckets {
            out.put_u16(part_len16(b.wire_len()));
            out.put_u16(part_len16(action::actions_len(&b.actions)));
            out.put_u32(b.bucket_id);
            action::emit_actions(&b.actions, out);
            out.put_slice(&b.properties);
        }
        out.put_slice(&self.properties);
    }
}
