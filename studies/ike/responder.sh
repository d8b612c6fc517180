# cryptoperf's IKE responder under test (rendered into the repetition's private directory
# {dir} and run as `sh {dir}/responder.sh`): strongSwan's charon with the study's
# strongswan.conf and swanctl.conf, in a mount namespace of its own with a tmpfs on /run (two
# charons on one host would share /run/charon.pid otherwise), its credentials in the swanctl
# layout (with key_store = "token", the private key on a SoftHSM2 token instead, for charon's
# pkcs11 plugin), its configuration loaded with swanctl; then it writes {dir}/ready, which
# cryptoperf waits for. cryptoperf stops the whole session (SIGTERM, then SIGKILL) after the repetition.
set -e
if [ -z "$CRYPTOPERF_IKE_NS" ]; then
    CRYPTOPERF_IKE_NS=1 exec unshare -m sh "$0"
fi
mount -t tmpfs -o mode=0755 tmpfs /run
cd {dir}
mkdir -p x509 x509ca private
cp {cert_file} x509/responder.pem
cp {ca_file} x509ca/ca.pem
cp {key_file} private/responder.pem
if [ "{key_store}" = "token" ]; then
    # the responder's private key on a PKCS#11 token (SoftHSM2, a token of this directory's own):
    # imported, then the file removed, so charon's pkcs11 plugin is the only way to sign
    export SOFTHSM2_CONF={dir}/softhsm2.conf
    mkdir -p {dir}/tokens
    echo "directories.tokendir = {dir}/tokens" > "$SOFTHSM2_CONF"
    softhsm2-util --init-token --free --label ike --pin 1234 --so-pin 12345678 > /dev/null
    softhsm2-util --import private/responder.pem --token ike --label responder --id 01 --pin 1234 > /dev/null
    rm private/responder.pem
    printf 'secrets {{\n  token-responder {{\n    handle = 01\n    module = softhsm\n    pin = 1234\n  }}\n}}\n' >> swanctl.conf
fi
charon=""
for c in /usr/lib/ipsec/charon /usr/libexec/ipsec/charon /usr/lib/strongswan/charon; do
    [ -x "$c" ] && charon="$c" && break
done
if [ -z "$charon" ]; then
    echo "strongSwan's charon is not installed (Debian/Ubuntu: apt-get install strongswan-charon strongswan-swanctl)"
    exit 1
fi
if [ ${{#PWD}} -gt 95 ]; then
    echo "the vici socket {dir}/charon.vici would be longer than a Unix socket's 107 bytes: give the study a shorter work_dir"
    exit 1
fi
export STRONGSWAN_CONF={dir}/strongswan.conf
"$charon" &
i=0
while [ ! -S {dir}/charon.vici ]; do
    i=$((i + 1))
    if [ $i -ge 500 ]; then echo "charon opened no vici socket in 10 s"; exit 1; fi
    if ! kill -0 $! 2>/dev/null; then echo "charon exited:"; tail -n 3 {dir}/charon.log; exit 1; fi
    sleep 0.02
done
if ! swanctl --load-all --noprompt --file {dir}/swanctl.conf --uri unix://{dir}/charon.vici > {dir}/swanctl.out 2>&1; then
    echo "swanctl could not load the responder's configuration:"
    grep -v "^plugin '\|^opening directory" {dir}/swanctl.out | tail -n 3
    exit 1
fi
# every plugin the configuration names must have loaded: charon skips one it cannot find
loaded=" $(swanctl --stats --uri unix://{dir}/charon.vici 2>/dev/null | sed -n 's/^loaded plugins: //p') "
for plugin in {plugins}; do
    case "$loaded" in
        *" $plugin "*) ;;
        *) echo "strongSwan plugin '$plugin' did not load (not installed? Debian ships it in libstrongswan, libstrongswan-standard-plugins, libstrongswan-extra-plugins or libcharon-extra-plugins)"
           exit 1 ;;
    esac
done
touch {dir}/ready
wait
