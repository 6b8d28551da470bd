//! Actions and instructions.

use super::*;

pub(super) fn write_action_list(s: &mut String, a: &[Action], n: &Names<'_>) {
    if a.is_empty() {
        s.push_str("drop");
        return;
    }
    for (i, x) in a.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        write_action(s, x, n);
    }
}

pub(super) fn hex_arg(s: &mut String, b: &[u8]) {
    for (i, x) in b.iter().enumerate() {
        if i > 0 {
            s.push('.');
        }
        let _ = write!(s, "{x:02x}");
    }
}

pub(super) fn reason_name(r: u8) -> std::borrow::Cow<'static, str> {
    match r {
        0 => "no_match".into(),
        1 => "action".into(),
        2 => "invalid_ttl".into(),
        3 => "action_set".into(),
        4 => "group".into(),
        5 => "packet_out".into(),
        other => other.to_string().into(),
    }
}

/// OVS's `format_CONTROLLER` for both NXAST_CONTROLLER and NXAST_CONTROLLER2.
pub(super) fn write_controller(s: &mut String, c: &Controller2) {
    let max_len = c.max_len.unwrap_or(u16::MAX);
    let id = c.controller_id.unwrap_or(0);
    let reason = c.reason.unwrap_or(1);
    let userdata = c.userdata.as_deref().unwrap_or(&[]);
    let meter = c.meter_id.unwrap_or(u32::MAX);
    if reason == 1 && id == 0 && userdata.is_empty() && !c.pause && meter == u32::MAX {
        let _ = write!(s, "CONTROLLER:{max_len}");
        return;
    }
    s.push_str("controller(");
    let start = s.len();
    if reason != 1 {
        let _ = write!(s, "reason={},", reason_name(reason));
    }
    if max_len != u16::MAX {
        let _ = write!(s, "max_len={max_len},");
    }
    if id != 0 {
        let _ = write!(s, "id={id},");
    }
    if !userdata.is_empty() {
        s.push_str("userdata=");
        hex_arg(s, userdata);
        s.push(',');
    }
    if c.pause {
        s.push_str("pause,");
    }
    if meter != u32::MAX {
        let _ = write!(s, "meter_id={meter},");
    }
    if s.len() > start {
        s.pop();
    }
    s.push(')');
}

pub(super) fn write_ct(s: &mut String, ct: &Ct, n: &Names<'_>) {
    s.push_str("ct(");
    let start = s.len();
    if ct.flags & 1 != 0 {
        s.push_str("commit,");
    }
    if ct.flags & 2 != 0 {
        s.push_str("force,");
    }
    if let Some(t) = ct.table {
        s.push_str("table=");
        push_table(s, t, n.tables);
        s.push(',');
    }
    match ct.zone {
        CtZoneSrc::Field { header, ofs_nbits } => {
            s.push_str("zone=");
            push_ofs_nbits(s, header, ofs_nbits);
            s.push(',');
        }
        CtZoneSrc::Imm(0) => {}
        CtZoneSrc::Imm(z) => {
            let _ = write!(s, "zone={z},");
        }
    }
    let mut rest = &ct.actions[..];
    if let Some((first, tail)) = rest.split_first() {
        if let Some(nat) = nat_text(first) {
            s.push_str(&nat);
            s.push(',');
            rest = tail;
        }
    }
    if !rest.is_empty() {
        s.push_str("exec(");
        write_action_list(s, rest, n);
        s.push_str("),");
    }
    match ct.alg {
        0 => {}
        21 => s.push_str("alg=ftp,"),
        69 => s.push_str("alg=tftp,"),
        a => {
            let _ = write!(s, "alg={a},");
        }
    }
    if s.len() > start && s.ends_with(',') {
        s.pop();
    }
    s.push(')');
}

/// NXAST_NAT (kept raw by the codec) in OVS's `format_NAT` form, or `None` if `a` is not one.
pub(super) fn nat_text(a: &Action) -> Option<String> {
    let Action::Experimenter { experimenter: crate::NX_VENDOR_ID, payload } = a else {
        return None;
    };
    let mut r = crate::wire::Reader::new(payload, "NXAST_NAT");
    if r.u16().ok()? != 36 {
        return None;
    }
    r.take(2).ok()?;
    let flags = r.u16().ok()?;
    let present = r.u16().ok()?;
    let get32 = |bit: u16, r: &mut crate::wire::Reader<'_>| {
        if present & bit != 0 {
            r.u32().ok()
        } else {
            Some(0)
        }
    };
    let v4min = get32(1, &mut r)?;
    let v4max = get32(2, &mut r)?;
    let get128 = |bit: u16, r: &mut crate::wire::Reader<'_>| {
        if present & bit != 0 {
            r.take(16).ok().and_then(|b| <[u8; 16]>::try_from(b).ok()).map(u128::from_be_bytes)
        } else {
            Some(0)
        }
    };
    let v6min = get128(4, &mut r)?;
    let v6max = get128(8, &mut r)?;
    let get16 = |bit: u16, r: &mut crate::wire::Reader<'_>| {
        if present & bit != 0 {
            r.u16().ok()
        } else {
            Some(0)
        }
    };
    let pmin = get16(16, &mut r)?;
    let pmax = get16(32, &mut r)?;
    let mut s = String::from("nat");
    if flags & 3 != 0 {
        s.push_str(if flags & 1 != 0 { "(src=" } else { "(dst=" });
        if present & 3 != 0 {
            let _ = write!(s, "{}", Ipv4Addr::from(v4min));
            if v4max != 0 && v4max != v4min {
                let _ = write!(s, "-{}", Ipv4Addr::from(v4max));
            }
        } else if present & 12 != 0 {
            s.push('[');
            push_ipv6(&mut s, v6min);
            s.push(']');
            if v6max != 0 && v6max != v6min {
                s.push_str("-[");
                push_ipv6(&mut s, v6max);
                s.push(']');
            }
        }
        if pmin != 0 {
            let _ = write!(s, ":{pmin}");
            if pmax != 0 && pmax != pmin {
                let _ = write!(s, "-{pmax}");
            }
        }
        s.push(',');
        if flags & 4 != 0 {
            s.push_str("persistent,");
        }
        if flags & 8 != 0 {
            s.push_str("hash,");
        }
        if flags & 16 != 0 {
            s.push_str("random,");
        }
        s.pop();
        s.push(')');
    }
    Some(s)
}

pub(super) fn write_resubmit(s: &mut String, in_port: u16, table: u8, ct: bool, n: &Names<'_>) {
    if in_port != 0xfff8 && table == 0xff && !ct {
        s.push_str("resubmit:");
        push_port16(s, in_port, n);
        return;
    }
    s.push_str("resubmit(");
    if in_port != 0xfff8 {
        push_port16(s, in_port, n);
    }
    s.push(',');
    if table != 0xff {
        push_table(s, table, n.tables);
    }
    if ct {
        s.push_str(",ct");
    }
    s.push(')');
}

pub(super) fn write_action(s: &mut String, a: &Action, n: &Names<'_>) {
    match a {
        Action::Output { port, max_len } => {
            let p16 = port16(*port);
            if p16.is_some_and(|p| p < 0xff00) || p16.is_none() {
                s.push_str("output:");
            }
            push_port32(s, *port, n);
            if *port == crate::port::CONTROLLER {
                let _ = write!(s, ":{max_len}");
            }
        }
        Action::Group(g) => {
            let _ = write!(s, "group:{g}");
        }
        Action::SetField(o) => write_set_field(s, o, n),
        Action::CopyField { n_bits, src_offset, dst_offset, src, dst } => {
            let h = |b: &[u8]| b.get(..4).and_then(|x| <[u8; 4]>::try_from(x).ok()).map_or(0, u32::from_be_bytes);
            s.push_str("move:");
            push_subfield(s, h(src), *src_offset, *n_bits);
            s.push_str("->");
            push_subfield(s, h(dst), *dst_offset, *n_bits);
        }
        Action::Meter(m) => {
            let _ = write!(s, "meter:{m}");
        }
        Action::Resubmit { in_port } => write_resubmit(s, *in_port, 0xff, false, n),
        Action::ResubmitTable { in_port, table, ct } => write_resubmit(s, *in_port, *table, *ct, n),
        Action::Note(n) => {
            s.push_str("note:");
            hex_arg(s, n);
        }
        Action::Controller { max_len, controller_id, reason } => write_controller(
            s,
            &Controller2 {
                max_len: Some(*max_len),
                controller_id: Some(*controller_id),
                reason: Some(*reason),
                ..Controller2::default()
            },
        ),
        Action::Controller2(c) => write_controller(s, c),
        Action::Conjunction { id, clause, n_clauses } => {
            let _ = write!(s, "conjunction({},{}/{})", id, u16::from(*clause) + 1, n_clauses);
        }
        Action::Ct(ct) => write_ct(s, ct, n),
        Action::CtClear => s.push_str("ct_clear"),
        Action::Clone(a) => {
            s.push_str("clone(");
            write_action_list(s, a, n);
            s.push(')');
        }
        Action::RegMove { n_bits, src_offset, dst_offset, src, dst } => {
            s.push_str("move:");
            push_subfield(s, *src, *src_offset, *n_bits);
            s.push_str("->");
            push_subfield(s, *dst, *dst_offset, *n_bits);
        }
        Action::OutputReg { src, ofs_nbits, .. } => {
            s.push_str("output:");
            push_ofs_nbits(s, *src, *ofs_nbits);
        }
        Action::Experimenter { experimenter, payload } => match nat_text(a) {
            Some(n) => s.push_str(&n),
            None => {
                let _ = write!(s, "experimenter({experimenter:#x},{})", hex_plain(payload));
            }
        },
        Action::Unknown { action_type, payload } => {
            let _ = write!(s, "action({action_type},{})", hex_plain(payload));
        }
    }
}

pub(super) fn write_instructions(s: &mut String, ins: &[Instruction], n: &Names<'_>) {
    // Raw instructions of modelled types (non-zero padding) read as OVS reads them.
    let lenient: Vec<std::borrow::Cow<'_, Instruction>> = ins
        .iter()
        .map(|i| match i {
            Instruction::Unknown { .. } => std::borrow::Cow::Owned(i.lenient()),
            _ => std::borrow::Cow::Borrowed(i),
        })
        .collect();
    let ins: Vec<&Instruction> = lenient.iter().map(|c| c.as_ref()).collect();
    let start = s.len();
    let mut parts = 0;
    let mut sep = |s: &mut String| {
        if parts > 0 {
            s.push(',');
        }
        parts += 1;
    };
    for i in &ins {
        if let Instruction::ApplyActions(a) = i {
            for x in a {
                sep(s);
                write_action(s, x, n);
            }
        }
    }
    if ins.iter().any(|i| matches!(i, Instruction::ClearActions)) {
        sep(s);
        s.push_str("clear_actions");
    }
    for i in &ins {
        if let Instruction::WriteActions(a) = i {
            sep(s);
            s.push_str("write_actions(");
            write_action_list(s, a, n);
            s.push(')');
        }
    }
    for i in &ins {
        if let Instruction::WriteMetadata { metadata, mask } = i {
            sep(s);
            s.push_str("write_metadata:");
            alt_hex(s, (*metadata).into());
            if *mask != u64::MAX {
                s.push('/');
                alt_hex(s, (*mask).into());
            }
        }
    }
    for i in &ins {
        if let Instruction::GotoTable(t) = i {
            sep(s);
            s.push_str("goto_table:");
            push_table(s, *t, n.tables);
        }
    }
    for i in &ins {
        if let Instruction::Unknown { instruction_type, payload } = i {
            sep(s);
            let _ = write!(s, "instruction({instruction_type},{})", hex_plain(payload));
        }
    }
    if s.len() == start {
        s.push_str("drop");
    }
}
