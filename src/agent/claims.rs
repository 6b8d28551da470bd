//! Who holds an address: the pods that claim each IP, the winner first (ranked by
//! [`crate::model::liveness`]), the claims that end at a deadline (a Terminating pod's), and
//! the addresses each model pod gets. Only the winner of an address holds it in the model, so
//! an address two pods claim is one pod's peer and one pod's name in the audit log.

use crate::compiler::Change;
use crate::model::{ClaimRank, ObjectRef, Pod};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::SystemTime;

// Keyed by names and addresses from the sources, hashed once per object per listing:
// foldhash (seeded per process, as std's SipHash is) takes a fraction of SipHash's time on
// such short keys.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// The model's pods, whose addresses the claims decide.
pub type Pods = BTreeMap<ObjectRef, Box<Pod>>;

/// The claims on addresses.
#[derive(Debug, Default, PartialEq)]
pub struct AddressClaims {
    /// Per address: the pods claiming it, the winner first. The winner is the one the model's
    /// pods give the address to, and the name of the address in the audit log.
    /// Kept sorted; a Vec, not a set: nearly every address has one claimant, and at 100,000
    /// pods a one-element BTreeSet per address costs about 70 MB more.
    claimants: HashMap<IpAddr, Vec<(ClaimRank, ObjectRef)>>,
    /// What a live pod claims is what its model pod holds (none once it has finished), except
    /// for a pod that loses an address to a stronger claim: then this holds all it claims, in
    /// its order. Nearly every pod wins all it claims, so no copy of its addresses is kept.
    contested: HashMap<ObjectRef, Box<[IpAddr]>>,
    /// Claims that end at a deadline, by deadline.
    deadlines: BTreeSet<(SystemTime, ObjectRef)>,
    /// The deadline of each claim in `deadlines`.
    deadline_of: HashMap<ObjectRef, SystemTime>,
}

impl AddressClaims {
    /// The pod that holds `ip`, if any.
    pub fn holder(&self, ip: &IpAddr) -> Option<&ObjectRef> {
        self.claimants.get(ip).and_then(|c| c.first()).map(|(_, r)| r)
    }

    /// Whether no claim is held at all.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.claimants.is_empty() && self.contested.is_empty() && self.deadline_of.is_empty()
    }

    /// The first claim whose deadline has passed by `now`.
    pub fn first_expired(&self, now: SystemTime) -> Option<ObjectRef> {
        self.deadlines.first().filter(|(deadline, _)| *deadline <= now).map(|(_, r)| r.clone())
    }

    /// Makes `pod`'s claim on its addresses, of `rank` and ending at `until` (its previous
    /// claim must be released first), and leaves in `pod.ips` the addresses it wins; returns
    /// the addresses it claimed.
    pub fn claim(&mut self, pod: &mut Pod, rank: ClaimRank, until: Option<SystemTime>) -> BTreeSet<IpAddr> {
        let r = ObjectRef { namespace: pod.namespace.clone(), name: pod.name.clone() };
        let claimed: BTreeSet<IpAddr> = pod.ips.iter().copied().collect();
        for ip in &pod.ips {
            let claim = (rank, r.clone());
            // Nearly every address has one claimant: a Vec of exactly one, not of four.
            let claimants = self.claimants.entry(*ip).or_insert_with(|| Vec::with_capacity(1));
            if let Err(at) = claimants.binary_search(&claim) {
                claimants.insert(at, claim);
            }
        }
        if let Some(deadline) = until {
            self.deadlines.insert((deadline, r.clone()));
            self.deadline_of.insert(r.clone(), deadline);
        }
        if !pod.ips.iter().all(|ip| self.holder(ip) == Some(&r)) {
            let won = self.won_of(&r, &pod.ips);
            let all = std::mem::replace(&mut pod.ips, won);
            self.contested.insert(r, all.into_boxed_slice());
        }
        claimed
    }

    /// What pod `r` claims (see [`AddressClaims::contested`]).
    fn claimed<'a>(&'a self, pods: &'a Pods, r: &ObjectRef) -> &'a [IpAddr] {
        match self.contested.get(r) {
            Some(claimed) => claimed,
            None => pods.get(r).map_or(&[], |pod| &pod.ips),
        }
    }

    /// Withdraws pod `r`'s claim; returns the addresses it claimed. The caller then updates or
    /// removes the model pod, whose addresses were part of the claim.
    pub fn release(&mut self, pods: &Pods, r: &ObjectRef) -> BTreeSet<IpAddr> {
        if let Some(deadline) = self.deadline_of.remove(r) {
            self.deadlines.remove(&(deadline, r.clone()));
        }
        let claimed: BTreeSet<IpAddr> = self.claimed(pods, r).iter().copied().collect();
        self.contested.remove(r);
        for ip in &claimed {
            if let Some(claimants) = self.claimants.get_mut(ip) {
                claimants.retain(|(_, p)| p != r);
                if claimants.is_empty() {
                    self.claimants.remove(ip);
                }
            }
        }
        claimed
    }

    /// The addresses of `claimed` (`r`'s claim) that `r` wins, in its order.
    fn won_of(&self, r: &ObjectRef, claimed: &[IpAddr]) -> Vec<IpAddr> {
        claimed.iter().filter(|ip| self.holder(ip) == Some(r)).copied().collect()
    }

    /// Gives the other claimants of `ips` (all but `except`) the addresses they now win, in
    /// `pods`; records the pods that changed.
    pub fn refresh(&mut self, pods: &mut Pods, ips: &BTreeSet<IpAddr>, except: &ObjectRef, changes: &mut Vec<Change>) {
        let others: BTreeSet<ObjectRef> = ips
            .iter()
            .filter_map(|ip| self.claimants.get(ip))
            .flatten()
            .map(|(_, p)| p.clone())
            .filter(|p| p != except)
            .collect();
        for p in others {
            let claimed = self.claimed(pods, &p).to_vec();
            let won = self.won_of(&p, &claimed);
            if won.len() == claimed.len() {
                self.contested.remove(&p);
            } else {
                self.contested.insert(p.clone(), claimed.into_boxed_slice());
            }
            if let Some(pod) = pods.get_mut(&p) {
                if pod.ips != won {
                    pod.ips = won;
                    changes.push(Change::Pod(p));
                }
            }
        }
    }
}
