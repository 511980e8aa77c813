#!/usr/bin/env python3
"""mlm_flag_table.py - the flag table of one Megatron-LM version, as moetune keeps it.

usage: python3.12 tools/mlm_flag_table.py MEGATRON_CHECKOUT OUT.tsv

Builds that version's own argument parser (add_megatron_arguments on an
ArgumentParser(allow_abbrev=False), as parse_args does) with stand-in modules
for torch, Transformer Engine and the other heavy packages, and writes one row
per option string: flag, action, nargs, type, choices, default, dest (the
conventions of core/dialects/mlm/README.md).  Python 3.12 is needed from core
0.18 on (typing.override).  WORLD_SIZE, RANK and LOCAL_RANK are unset while it
runs, so defaults read from them are the unset ones.

To add a dialect: check out the version (git worktree or archive of its tag),
run this, put the result at core/dialects/mlm/<version>.tsv, add the version
and its package version to core/dialect.c, and run the tests.
"""
import enum, sys, os, importlib, importlib.abc, importlib.machinery, types, argparse
root = sys.argv[1]; out = sys.argv[2]
sys.path.insert(0, root)
import pip._vendor.packaging as _pk, pip._vendor.packaging.version, pip._vendor.packaging.specifiers, pip._vendor.packaging.requirements
sys.modules['packaging'] = _pk
for n in ['version','specifiers','requirements','utils','markers','tags']:
    try:
        sys.modules['packaging.'+n] = importlib.import_module('pip._vendor.packaging.'+n)
    except Exception: pass

import typing
class _BM(typing._ProtocolMeta):
    def __getattr__(cls, name):
        if name.startswith('_'):
            raise AttributeError(name)
        return _mk(cls.__name__ + '.' + name)
class _Base(metaclass=_BM):
    def __init_subclass__(cls, **kw): pass
    def __init__(self, *a, **k): pass
    def __class_getitem__(cls, k): return cls
class _D:
    def __init__(self, name): object.__setattr__(self, '_n', name)
    def __getattr__(self, name):
        if name == '__file__': return '/nonexistent-dummy.so'
        if name.startswith('__') and name.endswith('__'):
            raise AttributeError(name)
        v = _mk(self._n + '.' + name)
        object.__setattr__(self, name, v)
        return v
    def __call__(self, *a, **k):
        if len(a) == 1 and not k and callable(a[0]) and not isinstance(a[0], _D):
            return a[0]
        return _mk(self._n + '()')
    def __getitem__(self, k): return self
    def __or__(self, o): return self
    def __ror__(self, o): return self
    def __iter__(self): return iter(())
    def __len__(self): return 0
    def __bool__(self): return True
    def __int__(self): return 0
    def __index__(self): return 0
    def __float__(self): return 0.0
    def __lt__(self, o): return False
    def __gt__(self, o): return False
    def __le__(self, o): return True
    def __ge__(self, o): return True
    def __hash__(self): return id(self)
    def __eq__(self, o): return self is o
    def __enter__(self): return self
    def __exit__(self, *a): return False
    def __repr__(self): return '<dummy %s>' % self._n
    def __mro_entries__(self, bases): return (type('B_'+self._n.split('.')[-1], (_Base,), {}),)
    def __instancecheck__(self, o): return False
    def __subclasscheck__(self, o): return False
    def __add__(self, o): return self
    __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __add__
    def __contains__(self, o): return False
    def __fspath__(self): return '/nonexistent-dummy'
    @property
    def __name__(self): return self._n.split('.')[-1]

def _mk(name):
    return _D(name)

STUB_PREFIXES = ()
class DummyModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith('__') and name.endswith('__'):
            raise AttributeError(name)
        v = _mk(self.__name__ + '.' + name)
        setattr(self, name, v)
        return v

class Loader(importlib.abc.Loader):
    def create_module(self, spec):
        m = DummyModule(spec.name)
        m.__path__ = []
        m.__file__ = '<dummy>'
        m.__version__ = '99.0.0'
        if spec.name == 'torch':
            m.__version__ = '2.9.0'
        if spec.name == 'transformer_engine':
            m.__version__ = '2.12.0'
        return m
    def exec_module(self, m): pass

stubbed = set()
class Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        top = name.split('.')[0]
        if top == 'megatron': return None
        if top in stubbed or name in stubbed:
            return importlib.machinery.ModuleSpec(name, Loader(), is_package=True)
        # try real
        if '.' not in name:
            for f in sys.meta_path:
                if f is self: continue
                try:
                    s = f.find_spec(name, path, target)
                except Exception:
                    s = None
                if s is not None: return None
            stubbed.add(top)
            return importlib.machinery.ModuleSpec(name, Loader(), is_package=True)
        return None
for t in ['torch','transformer_engine','apex','numpy','triton','einops','flash_attn','nvidia_resiliency_ext','modelopt','wandb','tensorboard','yaml','safetensors','tqdm','regex','sentencepiece','tiktoken','transformers','onelogger','one_logger','msc','multistorageclient','nv_one_logger','flashinfer','deep_ep','hybrid_ep','deep_gemm','emerging_optimizers','mamba_ssm','causal_conv1d','psutil','nvtx','pynvml','zarr','tensorstore','torch_memory_saver','scipy','pandas','datasets','nltk','jieba','PIL','torchvision','requests','aiohttp','fastapi','uvicorn','flask','tensorrt_llm','wrapt','hydra','omegaconf','nvtx','cupy','numba','opentelemetry','prometheus_client','kitchen','nvidia_kitchen','grpc','nemo','av','lightning']:
    stubbed.add(t)
sys.meta_path.insert(0, Finder())

for _e in ['WORLD_SIZE','RANK','LOCAL_RANK']: os.environ.pop(_e, None)
class PkgModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith('__'): raise AttributeError(name)
        try:
            return importlib.import_module(self.__name__ + '.' + name)
        except ModuleNotFoundError as e:
            if e.name != self.__name__ + '.' + name: raise
        if self.__name__ == 'megatron.training':
            gv = importlib.import_module('megatron.training.global_vars')
            if hasattr(gv, name): return getattr(gv, name)
        return _mk(self.__name__ + '.' + name)
for pk in ['megatron.training', 'megatron.rl']:
    m = PkgModule(pk); m.__path__ = [os.path.join(root, *pk.split('.'))]; m.__file__ = os.path.join(m.__path__[0], '__init__.py')
    sys.modules[pk] = m
A = importlib.import_module("megatron.training.arguments")
parser = argparse.ArgumentParser(description='Megatron-LM Arguments', allow_abbrev=False)
parser = A.add_megatron_arguments(parser)

def tname(t):
    if t is None: return '-'
    return getattr(t, '__name__', type(t).__name__).strip('<>')
def aname(a):
    n = type(a).__name__
    m = {'_StoreAction':'store','_StoreTrueAction':'store_true','_StoreFalseAction':'store_false','_AppendAction':'append','_StoreConstAction':'store_const','_AppendConstAction':'append_const','_CountAction':'count','_HelpAction':'help','_VersionAction':'version','_ExtendAction':'extend'}
    return m.get(n, n)
rows = []
for a in parser._actions:
    if aname(a) == 'help': continue
    if a.nargs is None: na = '-'
    else: na = str(a.nargs)
    ch = '-' if a.choices is None else '|'.join((c.name if isinstance(c, enum.Enum) else str(c)) for c in a.choices)
    for o in a.option_strings:
        rows.append((o, aname(a), na, tname(a.type), ch, ("''" if a.default == '' and isinstance(a.default, str) else str(a.default)), a.dest))
rows.sort(key=lambda r: r[0])
with open(out,'w') as f:
    f.write('flag\taction\tnargs\ttype\tchoices\tdefault\tdest\n')
    for r in rows:
        f.write('\t'.join(x.replace('\t',' ').replace('\n','\\n') for x in r)+'\n')
print(len(rows), 'rows; stubbed:', sorted(stubbed), file=sys.stderr)
